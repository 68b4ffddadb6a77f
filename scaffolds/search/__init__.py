"""The search scaffold: one- and two-hop questions over a generated world, solved with the `lookup` tool."""

from __future__ import annotations

from agentrl.scaffolds.react import ReactScaffold

from agentrl.config import RolloutConfig


class SearchScaffold(ReactScaffold):
    """ReAct over the bundled multi-hop questions with a knowledge-base lookup tool; reward: exact match."""

    name = "search"

    def __init__(self, *, rollout: RolloutConfig | None = None):
        from agentrl.scaffolds.search import tasks

        super().__init__(
            tools=tasks.TOOLS,
            tasks=tasks.tasks,
            system_prompt=tasks.SYSTEM_PROMPT,
            rewards=("exact_match",),
            rollout=rollout,
        )
