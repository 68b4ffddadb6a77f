"""Partial rollouts (APRIL) across steps: a slow group is carried, resumes with new weights and keeps the sampler
log-probabilities of the turns sampled before; a group older than the staleness bound is dropped."""

from __future__ import annotations

import asyncio
import json

import pytest
from agentrl.scaffolds.react import ReactScaffold

from agentrl.config import RolloutConfig
from agentrl.partial_rollouts import PartialRollouts
from agentrl.testing import ScriptedPolicy
from agentrl.tool import tool
from agentrl.tool_client import ToolClient
from agentrl.tool_server import create_app
from agentrl.types import StopReason, Task

pytestmark = pytest.mark.integration


@tool
async def wait(seconds: float) -> str:
    """Wait, then say so.

    Args:
        seconds: How long to wait.
    """
    await asyncio.sleep(seconds)
    return "waited"


def script(prompt: str) -> str:
    if "<tool_response>" in prompt:
        return "done"
    seconds = 0.6 if "slow" in prompt else 0.0
    return "<tool_call>\n" + json.dumps({"name": "wait", "arguments": {"seconds": seconds}}) + "\n</tool_call>"


def source(*names):
    queue = list(names)

    def take(n):
        return [Task(id=name, prompt=f"A {name.split('-')[0]} task.") for name in (queue.pop(0) for _ in range(n))]

    return take


async def run_steps(tiny_tokenizer, *, max_staleness_steps, step_tasks):
    policy = ScriptedPolicy(tiny_tokenizer, script, logprob=-0.5)
    scaffold = ReactScaffold(tools=[wait], rollout=RolloutConfig(max_turns=3))
    out = []
    async with ToolClient(app=create_app([wait])) as tools:
        partial = PartialRollouts(
            scaffold,
            policy,
            tools,
            samples_per_prompt=2,
            groups_per_step=2,
            extra_groups=1,
            max_staleness_steps=max_staleness_steps,
        )
        for step, names in enumerate(step_tasks, start=1):
            groups = await partial.collect(step, source(*names))
            out.append((groups, partial.stats, [job.task.id for job in partial.carried]))
            policy.version += 1  # the learner's update between steps
            policy.logprob -= 0.25  # ... changes what the sampler reports from now on
        await partial.aclose()
    return out


async def test_a_slow_group_is_carried_and_keeps_its_old_sampler_logprobs(tiny_tokenizer):
    steps = await run_steps(
        tiny_tokenizer, max_staleness_steps=1, step_tasks=[["fast-a", "fast-b", "slow-c"], ["fast-d", "slow-e"]]
    )
    (first, first_stats, first_carried), (second, second_stats, _) = steps
    assert sorted(g.task.id for g in first) == ["fast-a", "fast-b"]  # the step did not wait for the slow group
    assert first_carried == ["slow-c"] and first_stats.unfinished_groups == 1
    assert "slow-c" in {g.task.id for g in second} and second_stats.carried_groups == 1
    carried = next(g for g in second if g.task.id == "slow-c")
    for t in carried.trajectories:
        assert t.stop_reason is StopReason.ANSWERED and t.policy_version == 0  # started under the old weights
        assert set(t.turns[0].logprobs) == {-0.5}  # sampled before the update: the old sampler's logprobs
        assert set(t.turns[1].logprobs) == {-0.75}  # sampled after it
    assert second_stats.off_policy_trajectories == 2


async def test_a_group_beyond_the_staleness_bound_is_dropped(tiny_tokenizer):
    steps = await run_steps(
        tiny_tokenizer,
        max_staleness_steps=0,
        step_tasks=[["fast-a", "fast-b", "slow-c"], ["fast-d", "fast-e", "fast-f"]],
    )
    (_, _, first_carried), (second, second_stats, _) = steps
    assert first_carried == ["slow-c"]
    assert second_stats.dropped_stale_groups == 1 and "slow-c" not in {g.task.id for g in second}
    assert all(t.policy_version == 1 for g in second for t in g.trajectories)
