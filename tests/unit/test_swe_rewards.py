"""The SWE rewards read the episode's measurements, and fall back to the patch when there are none."""

import pytest
from agentrl.scaffolds.swe import bundled

from agentrl.reward import RewardStack
from agentrl.types import StopReason, Trajectory

pytestmark = pytest.mark.unit


def trajectory(answer=None, measurements=None, stop=StopReason.ANSWERED):
    return Trajectory("t", "g", "g/0", (), (), stop, answer=answer, measurements=measurements or {})


async def test_rewards_read_the_episode_measurements():
    task = bundled.instances()[0].to_task("/nonexistent")
    stack = RewardStack.from_specs(["swe_resolved", "swe_similarity:0"])
    measured = {"swe/resolved": 1.0, "swe/similarity": 0.5, "swe/patch_lines": 2.0}
    scored = await stack.score(task, trajectory(measurements=measured))
    assert scored.reward == 1.0 and scored.reward_components == {"swe_resolved": 1.0, "swe_similarity": 0.5}
    assert scored.measurements == measured  # scoring keeps what the scaffold measured


async def test_similarity_falls_back_to_the_patch_and_infra_failures_stay_unscored():
    instance = bundled.instances()[0]
    task = instance.to_task("/nonexistent")
    stack = RewardStack.from_specs(["swe_similarity"])
    assert (await stack.score(task, trajectory(answer=instance.patch))).reward == 1.0
    assert (await stack.score(task, trajectory(answer="no diff here"))).reward == -1.0
    failed = await stack.score(task, trajectory(answer=instance.patch, stop=StopReason.INFRA_ERROR))
    assert failed.reward is None


async def test_resolved_abstains_on_tasks_that_are_not_swe_tasks():
    from agentrl.types import Task

    scored = await RewardStack.from_specs(["swe_resolved"]).score(Task("x", "q"), trajectory(answer="x"))
    assert scored.reward_components == {}
