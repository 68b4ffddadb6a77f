"""Collect trajectory groups: every trajectory is its own asyncio task.

No trajectory waits for another at turn boundaries: each one alternates policy calls and tool calls on its own,
and the policy backend batches whatever generation requests are pending at the moment. A semaphore bounds the
trajectories in flight. A trajectory that raises is recorded as an infrastructure failure of its group, never
dropped silently and never scored as a zero reward.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Callable, Sequence
from typing import Any

from agentrl.types import StopReason, Task, Trajectory, TrajectoryGroup


def trajectory_seed(seed: int, step: int, task_id: str, sample: int) -> int:
    """A stable per-trajectory seed, so a resumed run draws the same samples as an uninterrupted one."""
    return zlib.crc32(f"{seed}/{step}/{task_id}/{sample}".encode())


async def collect_groups(
    scaffold: Any,
    tasks: Sequence[Task],
    policy: Any,
    tools: Any,
    *,
    samples_per_prompt: int,
    step: int,
    seed: int,
    max_concurrent: int = 256,
    on_done: Callable[[Trajectory], None] | None = None,
) -> list[TrajectoryGroup]:
    """Run `samples_per_prompt` trajectories of every task; return one group per task, in task order."""
    gate = asyncio.Semaphore(max_concurrent)

    async def one(task: Task, sample: int) -> Trajectory:
        group_id = f"s{step}/{task.id}"
        trajectory_id = f"{group_id}/{sample}"
        async with gate:
            try:
                trajectory = await scaffold.run(
                    task,
                    policy,
                    tools,
                    group_id=group_id,
                    trajectory_id=trajectory_id,
                    seed=trajectory_seed(seed, step, task.id, sample),
                )
            except Exception as e:  # a scaffold crash is an infrastructure failure of this trajectory only
                trajectory = Trajectory(
                    task_id=task.id,
                    group_id=group_id,
                    trajectory_id=trajectory_id,
                    prompt_ids=(),
                    turns=(),
                    stop_reason=StopReason.INFRA_ERROR,
                    error=f"{type(e).__name__}: {e}",
                    policy_version=getattr(policy, "version", 0),
                )
        if on_done is not None:
            on_done(trajectory)
        return trajectory

    jobs = [[asyncio.ensure_future(one(task, i)) for i in range(samples_per_prompt)] for task in tasks]
    return [
        TrajectoryGroup(task, tuple(await asyncio.gather(*group))) for task, group in zip(tasks, jobs, strict=False)
    ]
