"""`TaskWorkspace`: the terminal scaffold's own tools for preparing and checking a task's workspace.

The scaffold calls them through the episode's tool session, so they act on the same sandbox as the model's
`bash`, but the model is never offered them (`TaskSession` refuses them). Both run as fresh processes
(`Sandbox.exec`), not in the model's persistent shell: functions, aliases, traps or a changed PATH that the
model left behind there cannot reach the checker. The checker is Python run with `-I` (isolated mode), so a
module the model planted in the workspace (`json.py`, `sitecustomize.py`) is never imported in its place.
"""

from __future__ import annotations

import json
from typing import Any

from agentrl.tool import tool
from agentrl.types import ToolResult

SETUP_TIMEOUT_S = 30.0
CHECK_TIMEOUT_S = 30.0

_WRITE_FILES = """
import json, os, sys
os.chdir("/workspace")
for path, text in json.load(sys.stdin).items():
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
"""

CHECK_PRELUDE = '''
import os, subprocess, sys
os.chdir("/workspace")

def fail(message):
    print("FAIL: " + message)
    sys.exit(1)

def expect(condition, message):
    if not condition:
        fail(message)

def text(path):
    """The file's text; failing the check when it is missing or not a regular file."""
    if not os.path.isfile(path):
        fail(f"{path} is missing")
    with open(path, errors="replace") as f:
        return f.read()

def lines(path):
    """The file's lines, trailing whitespace and trailing blank lines dropped."""
    out = [line.rstrip() for line in text(path).splitlines()]
    while out and not out[-1]:
        out.pop()
    return out

def run(argv, *, stdin="", env=None, timeout=10):
    """Run a program the model wrote, with a clean environment; its stdout, or a failed check."""
    base = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/workspace", "LANG": "C.UTF-8"}
    try:
        done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout,
                              env={**base, **(env or {})})
    except subprocess.TimeoutExpired:
        fail(f"{' '.join(argv)} did not finish in {timeout} s")
    except OSError as e:
        fail(f"{' '.join(argv)} could not run: {e}")
    expect(done.returncode == 0, f"{' '.join(argv)} exited with {done.returncode}: {done.stderr[-300:]}")
    return done.stdout
'''


class TaskWorkspace:
    """Tools: `terminal_setup`, `terminal_check` (for the scaffold, not the model)."""

    uses_sandbox = True

    def __init__(self, sandbox: Any) -> None:
        self.sandbox = sandbox

    @tool
    async def terminal_setup(self, files: dict[str, str], commands: str = "") -> ToolResult:
        """Write files into the workspace, then run setup commands there (for the scaffold, not the model).

        Args:
            files: Workspace-relative path → file text.
            commands: Bash commands run in /workspace after the files are written (permissions, links, ...).
        """
        written = await self.sandbox.exec(
            ["python3", "-I", "-c", _WRITE_FILES], timeout_s=SETUP_TIMEOUT_S, stdin=json.dumps(files)
        )
        results = [written]
        if commands and written.exit_code == 0:
            script = "set -e\ncd /workspace\n" + commands
            results.append(
                await self.sandbox.exec(["bash", "--noprofile", "--norc", "-c", script], timeout_s=SETUP_TIMEOUT_S)
            )
        failed = next((r for r in results if r.exit_code != 0), None)
        if failed is not None:
            return ToolResult(call_id="", content=failed.as_text(), is_error=True, error_type="failed")
        return ToolResult(call_id="", content=f"wrote {len(files)} file(s)")

    @tool
    async def terminal_check(self, code: str) -> ToolResult:
        """Run a checker (Python, with `fail`, `expect`, `text`, `lines`, `run` predefined) in the workspace.
        `metrics["passed"]` is 1 when it exits with status 0 (for the scaffold, not the model).

        Args:
            code: The checker's Python source.
        """
        result = await self.sandbox.exec(["python3", "-I", "-c", CHECK_PRELUDE + code], timeout_s=CHECK_TIMEOUT_S)
        passed = result.exit_code == 0 and not result.timed_out
        report = "timed out" if result.timed_out else result.as_text()
        return ToolResult(call_id="", content=report, metrics={"passed": float(passed)})
