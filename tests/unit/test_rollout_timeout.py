"""`collect_groups` with a per-trajectory timeout: a trajectory that runs over is cancelled (its cleanup runs)
and recorded as an infrastructure failure; the others in its group are unaffected."""

import asyncio

import pytest

from agentrl.rollout.collect import collect_groups
from agentrl.types import StopReason, Task, Trajectory

pytestmark = pytest.mark.unit


class SleepyScaffold:
    """A user scaffold whose episodes take `task.metadata["seconds"]` (one per sample index) and then answer."""

    def __init__(self) -> None:
        self.cleaned_up: list[str] = []

    async def run(self, task, policy, tools, *, group_id, trajectory_id, seed):
        try:
            await asyncio.sleep(task.metadata["seconds"][int(trajectory_id.rsplit("/", 1)[1])])
        finally:
            self.cleaned_up.append(trajectory_id)
        return Trajectory(
            task_id=task.id,
            group_id=group_id,
            trajectory_id=trajectory_id,
            prompt_ids=(1,),
            turns=(),
            stop_reason=StopReason.ANSWERED,
        )


def test_a_trajectory_past_its_timeout_is_an_infrastructure_failure() -> None:
    scaffold = SleepyScaffold()
    task = Task(id="t", prompt="p", metadata={"seconds": [0.0, 30.0, 0.01]})

    async def collect():
        return await collect_groups(scaffold, [task], None, None, samples_per_prompt=3, step=0, seed=0, timeout_s=0.3)

    (group,) = asyncio.run(asyncio.wait_for(collect(), 10))
    reasons = [t.stop_reason for t in group.trajectories]
    assert reasons == [StopReason.ANSWERED, StopReason.INFRA_ERROR, StopReason.ANSWERED]
    assert "trajectory_timeout_s=0.3" in group.trajectories[1].error
    assert sorted(scaffold.cleaned_up) == ["s0/t/0", "s0/t/1", "s0/t/2"]  # the cancelled one cleaned up too
