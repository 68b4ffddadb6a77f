"""`FileEditor`: the file tools a SWE agent needs, working on the session's sandboxed workspace.

Paths are relative to the workspace (absolute paths are taken as they are, and the sandbox decides what they
may reach: outside the workspace everything is read-only). `str_replace` needs `old_str` to occur exactly
once, and says where the occurrences are when it does not, so the policy can make the match unique. All
failures are `ToolResult`s with `is_error` (missing file, no match, several matches), never exceptions.
"""

from __future__ import annotations

import posixpath
from typing import Any

from agentrl.errors import ToolError
from agentrl.tool import tool

VIEW_LINES = 400
"""Lines shown when `view` is given no range."""
MAX_FILE_BYTES = 4 << 20
"""Largest file `view` and `str_replace` read."""
LISTED_ENTRIES = 200
"""Entries shown by a directory `view`, `find_files` and `grep`."""


class FileEditor:
    """Tools: `view`, `create_file`, `str_replace`, `find_files`, `grep`."""

    uses_sandbox = True

    def __init__(self, sandbox: Any) -> None:
        self.sandbox = sandbox

    @tool
    async def view(self, path: str, start_line: int = 1, end_line: int | None = None) -> str:
        """Show a file with line numbers (lines `start_line`..`end_line`, 1-based and inclusive), or list a
        directory two levels deep.

        Args:
            path: File or directory, relative to the workspace.
            start_line: First line to show.
            end_line: Last line to show; the end of the file (at most 400 lines) when omitted.
        """
        full = self._path(path)
        if await self._is_dir(full):
            listing = await self._lines(["find", full, "-maxdepth", "2", "-not", "-path", "*/.*"])
            return "\n".join(sorted(listing)) or "(empty directory)"
        lines = (await self._read(full)).splitlines()
        if start_line < 1 or (end_line is not None and end_line < start_line):
            raise ToolError(
                f"bad line range {start_line}..{end_line}: lines are numbered from 1", error_type="bad_arguments"
            )
        last = min(len(lines), end_line if end_line is not None else start_line + VIEW_LINES - 1)
        shown = [f"{n:6d}\t{lines[n - 1]}" for n in range(start_line, last + 1)]
        if not shown:
            return f"({path} has {len(lines)} lines)"
        if end_line is None and last < len(lines):
            shown.append(f"[... {len(lines) - last} more lines: view with start_line={last + 1}]")
        return "\n".join(shown)

    @tool
    async def create_file(self, path: str, content: str) -> str:
        """Create a file with the given content, or overwrite it; parent directories are created.

        Args:
            path: File to write, relative to the workspace.
            content: The whole new content of the file.
        """
        await self._write(self._path(path), content)
        return f"wrote {path} ({content.count(chr(10)) + (not content.endswith(chr(10)) and bool(content))} lines)"

    @tool
    async def str_replace(self, path: str, old_str: str, new_str: str) -> str:
        """Replace the one occurrence of `old_str` in a file by `new_str`. `old_str` must match exactly
        (whitespace included) and occur exactly once; include surrounding lines to make it unique.

        Args:
            path: File to edit, relative to the workspace.
            old_str: The exact text to replace.
            new_str: The replacement text.
        """
        if not old_str:
            raise ToolError("old_str is empty: give the exact text to replace", error_type="bad_arguments")
        full = self._path(path)
        text = await self._read(full)
        count = text.count(old_str)
        if count == 0:
            raise ToolError(f"old_str does not occur in {path}; view the file and copy the text exactly")
        if count > 1:
            starts, at = [], text.find(old_str)
            while at >= 0:
                starts.append(text.count("\n", 0, at) + 1)
                at = text.find(old_str, at + 1)
            raise ToolError(f"old_str occurs {count} times in {path} (lines {starts}); make it unique")
        await self._write(full, text.replace(old_str, new_str, 1))
        first = text.count("\n", 0, text.find(old_str)) + 1
        return f"edited {path}: replaced lines {first}-{first + old_str.count(chr(10))}"

    @tool
    async def find_files(self, pattern: str, path: str = ".") -> str:
        """Find files whose name matches a shell glob, e.g. `*.py` or `test_*`.

        Args:
            pattern: Glob matched against file names.
            path: Directory to search, relative to the workspace.
        """
        found = await self._lines(["find", self._path(path), "-name", pattern, "-not", "-path", "*/.git/*"])
        return "\n".join(sorted(found)) or "no files match"

    @tool
    async def grep(self, pattern: str, path: str = ".", include: str | None = None) -> str:
        """Search file contents for a regular expression (extended syntax); prints `file:line:text`.

        Args:
            pattern: Regular expression, e.g. `def parse_` or `TODO|FIXME`.
            path: File or directory to search, relative to the workspace.
            include: Only search files whose name matches this glob, e.g. `*.py`.
        """
        argv = ["grep", "-rnIE", "--exclude-dir=.git", pattern, self._path(path)]
        if include:
            argv.insert(2, f"--include={include}")
        return "\n".join(await self._lines(argv, ok_codes=(0, 1))) or "no matches"

    def _path(self, path: str) -> str:
        return posixpath.normpath(posixpath.join(self.sandbox.workspace, path))

    async def _read(self, full: str) -> str:
        text = await self.sandbox.read_file(full, max_bytes=MAX_FILE_BYTES)
        if len(text.encode()) > MAX_FILE_BYTES:
            raise ToolError(f"{full} is larger than {MAX_FILE_BYTES >> 20} MB: use grep or another tool on it")
        return text

    async def _write(self, full: str, content: str) -> None:
        await self.sandbox.write_file(full, content)

    async def _is_dir(self, full: str) -> bool:
        return (await self.sandbox.exec(["test", "-d", full], timeout_s=10.0)).exit_code == 0

    async def _lines(self, argv: list[str], ok_codes: tuple[int, ...] = (0,)) -> list[str]:
        result = await self.sandbox.exec(argv, timeout_s=30.0)
        if result.exit_code not in ok_codes:
            raise ToolError(result.stderr.strip() or f"{argv[0]} failed with exit code {result.exit_code}")
        lines = result.stdout.splitlines()
        if len(lines) > LISTED_ENTRIES:
            lines = lines[:LISTED_ENTRIES] + [f"[... {len(lines) - LISTED_ENTRIES} more]"]
        return lines
