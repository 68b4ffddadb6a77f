"""`PythonInterpreter`: one persistent Python namespace per session, run in the session's sandbox.

Variables, functions and imports survive between calls, like cells of a notebook; the value of a cell's last
expression is shown as `Out: ...`. An exception in the code is an ordinary result (the traceback is the
observation); a call that runs past `sandbox.call_timeout_s` is a `timeout` error, and a sandbox that breaks
is a `sandbox_error` (the next call gets a fresh interpreter on the same workspace).
"""

from __future__ import annotations

from typing import Any

from agentrl.tool import tool
from agentrl.types import ToolResult


class PythonInterpreter:
    """Tools: `python`."""

    uses_sandbox = True

    def __init__(self, sandbox: Any) -> None:
        self.sandbox = sandbox

    @tool
    async def python(self, code: str) -> ToolResult:
        """Run Python code in a persistent interpreter (variables and imports stay for later calls) and return
        its printed output and the value of the last expression. The working directory is the workspace.

        Args:
            code: Python source to run, one or more statements.
        """
        result = await self.sandbox.run_python(code)
        metrics = {"exit_code": float(-1 if result.exit_code is None else result.exit_code)}
        if result.timed_out:
            return ToolResult(
                call_id="", content=result.as_text(), is_error=True, error_type="timeout", metrics=metrics
            )
        return ToolResult(call_id="", content=result.as_text(show_exit_code=False), metrics=metrics)
