"""`LocalRollouts`: the run's rollouts in this process, on its own event loop, sampler and tool backend.

The trainer asks its rollouts for the groups of a list of tasks, for training (`rollout.*`: the training scaffold,
its samples per prompt and branching) or for evaluation (`eval.*`: the evaluation scaffold at `eval.temperature`,
`eval.samples_per_task`, no branching). `agentrl.distributed.ray_rollouts.RayRollouts` answers the same calls with
rollout workers on a Ray cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentrl.rollout.collect import collect_groups
from agentrl.types import Task, TrajectoryGroup


class LocalRollouts:
    """Rollouts over `scaffold` (training) and `eval_scaffold` (evaluation) with one policy and tool backend."""

    def __init__(self, config: Any, scaffold: Any, eval_scaffold: Any, policy: Any, tools: Any) -> None:
        self.config, self.scaffold, self.eval_scaffold = config, scaffold, eval_scaffold
        self.policy, self.tools = policy, tools
        self.stats: dict[str, float] = {}
        """What the last `collect` adds to the step's metrics (nothing here; Ray counts re-issued groups)."""

    async def collect(
        self, tasks: Sequence[Task], step: int, *, evaluation: bool = False, progress: Any = None
    ) -> list[TrajectoryGroup]:
        """One group per task, in the tasks' order (`step` -1 for evaluation episodes)."""
        return await collect_groups(
            self.eval_scaffold if evaluation else self.scaffold,
            tasks,
            self.policy,
            self.tools,
            **collect_settings(self.config, step, evaluation=evaluation),
            progress=progress,
        )

    def publish(self, model: Any, version: int) -> None:
        """The sampler shares the learner's model (or the policy pushes it to its servers): nothing to send."""

    async def aclose(self) -> None:
        await self.tools.aclose()


def collect_settings(config: Any, step: int, *, evaluation: bool) -> dict[str, Any]:
    """`collect_groups`' settings for training (`rollout.*`) or evaluation (`eval.*`) episodes of `step`."""
    rollout = config.rollout
    return {
        "samples_per_prompt": config.eval.samples_per_task if evaluation else rollout.samples_per_prompt,
        "step": -1 if evaluation else step,
        "seed": config.seed,
        "max_concurrent": rollout.max_concurrent_trajectories,
        "branching": None if evaluation else rollout.branch_rule,
        "timeout_s": rollout.trajectory_timeout_s,
    }
