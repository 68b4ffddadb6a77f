"""The code scaffold: arithmetic a small model cannot do in its head, solved with the `calculate` tool."""

from __future__ import annotations

from agentrl.scaffolds.react import ReactScaffold

from agentrl.config import RolloutConfig


class CodeScaffold(ReactScaffold):
    """ReAct over the bundled arithmetic tasks with a calculator tool; reward: exact match."""

    name = "code"

    def __init__(self, *, rollout: RolloutConfig | None = None):
        from agentrl.scaffolds.code import tasks

        super().__init__(
            tools=tasks.TOOLS,
            tasks=tasks.tasks,
            system_prompt=tasks.SYSTEM_PROMPT,
            rewards=("exact_match",),
            rollout=rollout,
        )
