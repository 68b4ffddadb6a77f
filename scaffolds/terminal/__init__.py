"""The terminal scaffold: shell tasks in a sandboxed workspace, prepared before the episode and checked after it.

The model gets the sandboxed `bash` tool (and, with `file_tools=True`, the file editor). Each bundled task
(`tasks.py`) materialises its files in the workspace through the session before the first turn, out of the
model's sight, and runs its checker in the same workspace after the last turn; the checker's outcome is the
`terminal_check` reward component.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentrl.scaffolds.react import ReactScaffold
from agentrl.scaffolds.terminal.checker import CHECK_COMPONENT
from agentrl.scaffolds.terminal.session import WORKSPACE_TOOLS, TaskSession

from agentrl.config import RolloutConfig
from agentrl.protocols import ToolBackend, ToolSession
from agentrl.tool import collect_tools
from agentrl.types import Task

SYSTEM_PROMPT = (
    "You work in a Linux shell; the current directory is the workspace /workspace. Use the bash tool to do the "
    "task, check your work, then reply with a one-line summary."
)


class TerminalScaffold(ReactScaffold):
    """ReAct over the bundled shell tasks with the sandboxed `bash` tool; reward: the task's checker."""

    name = "terminal"

    def __init__(self, *, rollout: RolloutConfig | None = None, file_tools: bool = False):
        from agentrl.scaffolds.terminal import tasks
        from agentrl.scaffolds.terminal.workspace import TaskWorkspace
        from agentrl.tools.files import FileEditor
        from agentrl.tools.terminal import Shell

        offered = [Shell, FileEditor] if file_tools else [Shell]
        super().__init__(
            tools=[*offered, TaskWorkspace],
            tasks=tasks.tasks,
            system_prompt=SYSTEM_PROMPT,
            rewards=(CHECK_COMPONENT,),
            rollout=rollout,
        )
        self._offered = tuple(t.name for spec in offered for t in collect_tools(spec))

    def tool_names(self, task: Task | None = None) -> tuple[str, ...]:
        """The tools the model is offered (the task's `metadata["tools"]`, else bash and the optional file tools)."""
        if task is not None and task.metadata.get("tools"):
            return tuple(task.metadata["tools"])
        return self._offered

    async def open_episode(self, task: Task, tools: ToolBackend, names: Sequence[str] | None) -> ToolSession:
        offered = tuple(names) if names is not None else self._offered
        inner = await tools.open_session([*offered, *WORKSPACE_TOOLS])
        session = TaskSession(inner, offered)
        setup = task.metadata.get("setup") or {}
        try:
            if setup.get("files") or setup.get("commands"):
                await session.setup(dict(setup.get("files") or {}), setup.get("commands") or "")
        except BaseException:
            await inner.close()
            raise
        return session

    async def finish_episode(self, task: Task, session: ToolSession) -> dict[str, float]:
        if not isinstance(session, TaskSession) or "check" not in task.metadata:
            return {}
        passed, _ = await session.check(task.metadata["check"])
        return {CHECK_COMPONENT: float(passed)}


class TerminalFilesScaffold(TerminalScaffold):
    """The terminal scaffold with the file editor (view, create_file, str_replace, find_files, grep) as well."""

    name = "terminal_files"

    def __init__(self, *, rollout: RolloutConfig | None = None):
        super().__init__(rollout=rollout, file_tools=True)
