"""`Shell`: one persistent bash per session, run in the session's sandbox.

The working directory, exported variables and functions survive between calls; the exit code is reported. A
command that runs past `sandbox.call_timeout_s` is stopped with its whole process group and is a `timeout`
error; bash restarts in the same directory for the next call.
"""

from __future__ import annotations

from typing import Any

from agentrl.tool import tool
from agentrl.types import ToolResult


class Shell:
    """Tools: `bash`."""

    uses_sandbox = True

    def __init__(self, sandbox: Any) -> None:
        self.sandbox = sandbox

    @tool
    async def bash(self, command: str) -> ToolResult:
        """Run a bash command in a persistent shell (the working directory and exported variables stay for later
        calls) and return its combined output and exit code. Commands cannot read from stdin.

        Args:
            command: The command line to run, e.g. `ls -la` or `cd src && pytest -q`.
        """
        result = await self.sandbox.run_shell(command)
        metrics = {"exit_code": float(-1 if result.exit_code is None else result.exit_code)}
        if result.timed_out:
            return ToolResult(
                call_id="", content=result.as_text(), is_error=True, error_type="timeout", metrics=metrics
            )
        return ToolResult(call_id="", content=result.as_text(), metrics=metrics)
