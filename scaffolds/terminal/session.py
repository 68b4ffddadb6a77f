"""`TaskSession`: one terminal episode's tool session, with the task's setup and checker run through it.

It wraps the session the tool server opened (which also enables the scaffold's own `TaskWorkspace` tools) and
hands the model only the tools it was offered: a call to any other name is a `not_found` result, as if the tool
did not exist. Forks stay wrapped, so a branch of an episode can still be checked.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from agentrl.errors import GradingError, TaskSetupError
from agentrl.protocols import ToolSession
from agentrl.types import ToolCall, ToolResult

SETUP_TOOL = "terminal_setup"
CHECK_TOOL = "terminal_check"
WORKSPACE_TOOLS = (SETUP_TOOL, CHECK_TOOL)


class TaskSession:
    """A `ToolSession` that offers the model `offered` and keeps the task tools for the scaffold."""

    def __init__(self, inner: ToolSession, offered: Sequence[str]) -> None:
        self.inner = inner
        self.offered = frozenset(offered)
        self.session_id = inner.session_id

    async def call(self, call: ToolCall) -> ToolResult:
        if call.name not in self.offered:
            available = ", ".join(sorted(self.offered))
            return ToolResult.error(call.id, "not_found", f"unknown tool {call.name!r}; available tools: {available}")
        return await self.inner.call(call)

    async def fork(self) -> TaskSession:
        return TaskSession(await self.inner.fork(), self.offered)

    async def close(self) -> None:
        await self.inner.close()

    async def setup(self, files: dict[str, str], commands: str = "") -> None:
        """Materialise the task's files; a failure is the infrastructure's (the task never reached the model)."""
        result = await self._own_call(SETUP_TOOL, {"files": files, "commands": commands})
        if result.is_error:
            raise TaskSetupError(f"task setup failed ({result.error_type}): {result.text}")

    async def check(self, code: str) -> tuple[bool, str]:
        """Run the checker in the workspace as it is now: (passed, the checker's report)."""
        result = await self._own_call(CHECK_TOOL, {"code": code})
        if result.is_error:  # the checker itself could not run (sandbox gone, server timeout)
            raise GradingError(f"task checker failed to run ({result.error_type}): {result.text}")
        return result.metrics.get("passed", 0.0) == 1.0, result.text

    async def _own_call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        return await self.inner.call(ToolCall(id=f"{name}_{uuid.uuid4().hex[:12]}", name=name, arguments=arguments))
