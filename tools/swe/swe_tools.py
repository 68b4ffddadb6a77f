"""`SweTools`: a SWE episode's tools on the session's sandboxed workspace.

The model sees `run_tests` (the task's visible tests, never the hidden ones: those are not in the workspace) and
`submit`. The scaffold also calls two tools the model is not shown: `swe_setup` puts the repository at its base
commit into the workspace before the first turn (once per session: a second call is refused, so a model that
guesses the name cannot reset or replace the repository), and `swe_diff` reads the submission, the workspace's
diff against that base.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from agentrl.tools.swe import workspace

from agentrl.errors import ToolError
from agentrl.tool import tool

TEST_TIMEOUT_S = 60.0
"""Longest a `run_tests` call may take (the sandbox's own call timeout may cut it shorter)."""
OUTPUT_LINES = 60
"""Lines of pytest output `run_tests` returns (the end of it, where the summary is)."""
HIDDEN_TOOLS = ("swe_setup", "swe_diff")
STATE_PATH = "/tmp/.agentrl-swe-state.json"


class SweTools:
    """Tools: `run_tests`, `submit` (and, for the scaffold only, `swe_setup`, `swe_diff`)."""

    uses_sandbox = True

    def __init__(self, sandbox: Any) -> None:
        self.sandbox = sandbox
        self.base: str | None = None
        self.visible_tests: list[str] = []

    @tool
    async def run_tests(self, path: str | None = None) -> str:
        """Run the repository's visible tests with pytest and show the end of the output.

        Args:
            path: Only run this test file or test id (e.g. `tests/test_core.py::test_parse`); all visible tests
                when omitted.
        """
        await self._require_setup()
        targets = [path] if path else self.visible_tests
        argv = workspace.pytest_argv(["-q", "--no-header", "-rfE", *targets])
        result = await self.sandbox.exec(argv, timeout_s=TEST_TIMEOUT_S)
        if result.timed_out:
            raise ToolError(f"the tests did not finish within {TEST_TIMEOUT_S:.0f} s", error_type="timeout")
        lines = (result.stdout + result.stderr).strip().splitlines()
        shown = lines[-OUTPUT_LINES:]
        if len(lines) > OUTPUT_LINES:
            shown.insert(0, f"[... {len(lines) - OUTPUT_LINES} earlier lines]")
        return "\n".join(shown + [f"[pytest exit code {result.exit_code}]"])

    @tool
    async def submit(self) -> str:
        """Submit the current state of the repository as your fix; the episode ends."""
        await self._require_setup()
        return "Submitted: the diff of the workspace against the original repository is your patch. The task is over."

    @tool
    async def swe_setup(self, archive_b64: str, visible_tests: list[str] | None = None) -> str:
        """Put the task's repository into the workspace (the scaffold calls this once before the first turn).

        Args:
            archive_b64: The repository at its base commit, a gzipped tar, base64-encoded.
            visible_tests: Test files or ids `run_tests` runs by default.
        """
        if self.base is not None or await self._load_state():
            raise ToolError("the repository is already set up")
        await workspace.install_pytest(self.sandbox)
        self.base = await workspace.materialise(self.sandbox, archive_b64)
        self.visible_tests = list(visible_tests or ())
        state = {"base": self.base, "visible_tests": self.visible_tests}
        await self.sandbox.write_file(STATE_PATH, json.dumps(state))
        # The shell tool runs in the same sandbox: make `pytest` there the harness's pytest too.
        await self.sandbox.run_shell(f"export PYTHONPATH={shlex.quote(workspace.PYTEST_DIR)}", timeout_s=10.0)
        return f"repository ready at {self.sandbox.workspace} (base {self.base[:12]})"

    @tool
    async def swe_diff(self) -> str:
        """The workspace's diff against the base commit (the submission)."""
        await self._require_setup()
        return await workspace.diff(self.sandbox, self.base)

    async def _require_setup(self) -> None:
        if self.base is None and not await self._load_state():
            raise ToolError("no repository has been set up in this session")

    async def _load_state(self) -> bool:
        """A forked session gets a fresh instance on a copy of the sandbox: its state comes back from there."""
        try:
            state = json.loads(await self.sandbox.read_file(STATE_PATH))
        except Exception:  # no state file: nothing was set up in this sandbox
            return False
        self.base, self.visible_tests = state["base"], list(state["visible_tests"])
        return True
