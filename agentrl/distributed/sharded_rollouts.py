"""`ShardedRollouts`: a data-parallel rank's rollouts (`agentrl train --nproc N`, with or without `--ray`).

Each rank of a multi-process run scores, credits and trains on its share of the step's groups (the `share` of
`agentrl/train/distributed.py`). Where the episodes are played differs:

- in the ranks themselves (`LocalRollouts`): each rank plays its share of the tasks with its own sampler;
- on Ray (`RayRollouts`): rank 0 alone holds the rollout workers and plays every task through them, then hands each
  rank its share of the groups. Only rank 0 publishes weights to the workers (every rank holds the same weights).

Either way a rank ends a collect with the groups of the tasks `DataParallel.shard` gives it, so `gather` puts the
whole batch back in the tasks' order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentrl.types import Task, TrajectoryGroup


class ShardedRollouts:
    """Rollouts of one rank; `inner` plays them (None on the ranks other than 0 when `central`)."""

    def __init__(self, inner: Any, data_parallel: Any, *, central: bool) -> None:
        self.inner, self.dp, self.central = inner, data_parallel, central

    @property
    def tools(self) -> Any:
        return getattr(self.inner, "tools", None)

    @property
    def stats(self) -> dict[str, float]:
        return self.inner.stats if self.inner is not None else {}

    async def collect(
        self, tasks: Sequence[Task], step: int, *, evaluation: bool = False, progress: Any = None
    ) -> list[TrajectoryGroup]:
        """This rank's share of the groups of `tasks` (every rank passes the same tasks)."""
        if not self.central:
            return await self.inner.collect(self.dp.shard(tasks), step, evaluation=evaluation, progress=progress)
        groups = None
        if self.dp.is_main:
            groups = await self.inner.collect(tasks, step, evaluation=evaluation, progress=progress)
        return self.dp.shard(self.dp.share(groups))

    def publish(self, model: Any, version: int) -> None:
        if self.inner is not None:
            self.inner.publish(model, version)

    async def aclose(self) -> None:
        if self.inner is not None:
            await self.inner.aclose()
