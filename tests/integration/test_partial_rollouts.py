"""Partial rollouts (APRIL) across steps: a slow group is carried, resumes with new weights and keeps the sampler
log-probabilities of the turns sampled before; a group older than the staleness bound is dropped. Across a resume,
carried groups come back from the checkpoint as tasks that are re-issued before new ones."""

from __future__ import annotations

import asyncio
import json

import pytest
from agentrl.scaffolds.react import ReactScaffold

from agentrl.config import RolloutConfig, load_config
from agentrl.rollout.partial import PartialRollouts
from agentrl.runlog.progress import RolloutProgress
from agentrl.testing import ScriptedPolicy
from agentrl.tool import tool
from agentrl.toolserver.app import create_app
from agentrl.toolserver.client import ToolClient
from agentrl.train.checkpoint import TrainerState
from agentrl.trainer import Trainer
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
    seconds = 5.0 if "A stuck task" in prompt else 0.6 if "A slow task" in prompt else 0.0
    return "<tool_call>\n" + json.dumps({"name": "wait", "arguments": {"seconds": seconds}}) + "\n</tool_call>"


def source(*names):
    queue = list(names)

    def take(n):
        return [Task(id=name, prompt=f"A {name.split('-')[0]} task.") for name in (queue.pop(0) for _ in range(n))]

    return take


def two_groups_and_one_spare(scaffold, policy, tools, max_staleness_steps, timeout_s=0.0):
    return PartialRollouts(
        scaffold,
        policy,
        tools,
        samples_per_prompt=2,
        groups_per_step=2,
        extra_groups=1,
        max_staleness_steps=max_staleness_steps,
        timeout_s=timeout_s,
    )


async def run_steps(tiny_tokenizer, *, max_staleness_steps, step_tasks):
    policy = ScriptedPolicy(tiny_tokenizer, script, logprob=-0.5)
    scaffold = ReactScaffold(tools=[wait], rollout=RolloutConfig(max_turns=3))
    out = []
    async with ToolClient(app=create_app([wait])) as tools:
        partial = two_groups_and_one_spare(scaffold, policy, tools, max_staleness_steps)
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


async def test_the_timeout_counts_running_time_not_time_parked_between_steps(tiny_tokenizer):
    """`trajectory_timeout_s=1.5`: the slow group runs 0.6 s, is parked for 2 s, and still answers at the next
    step; the stuck one (a 5 s tool call) is cut off at 1.5 s as an infrastructure failure."""
    policy = ScriptedPolicy(tiny_tokenizer, script)
    scaffold = ReactScaffold(tools=[wait], rollout=RolloutConfig(max_turns=3))
    async with ToolClient(app=create_app([wait])) as tools:
        partial = two_groups_and_one_spare(scaffold, policy, tools, max_staleness_steps=2, timeout_s=1.5)
        first = await partial.collect(1, source("fast-a", "fast-b", "slow-c"))
        assert [job.task.id for job in partial.carried] == ["slow-c"]
        await asyncio.sleep(2.0)  # parked: the learner's update between steps
        second = await partial.collect(2, source("stuck-d", "fast-e"))
        third = await partial.collect(3, source("fast-f", "fast-g"))
        await partial.aclose()
    assert sorted(g.task.id for g in first) == ["fast-a", "fast-b"]
    slow = next(g for g in second if g.task.id == "slow-c")
    assert [t.stop_reason for t in slow.trajectories] == [StopReason.ANSWERED] * 2
    stuck = next(g for g in second + third if g.task.id == "stuck-d")
    assert [t.stop_reason for t in stuck.trajectories] == [StopReason.INFRA_ERROR] * 2
    assert all("trajectory_timeout_s=1.5" in t.error for t in stuck.trajectories)


# --- resume: carried groups outlive the process as tasks to re-issue -----------------------------------------


def recording_source(*names):
    """`source`, also recording how many new tasks each step asked for."""
    take, asked = source(*names), []

    def counted(n):
        asked.append(n)
        return take(n)

    return counted, asked


async def resumed_step(tiny_tokenizer, checkpoint, *, version, max_staleness_steps=1):
    """A new process: fresh policy, tool server and `PartialRollouts`, restored from `checkpoint`, runs step 2."""
    policy = ScriptedPolicy(tiny_tokenizer, script, logprob=-0.5)
    policy.version = version
    scaffold = ReactScaffold(tools=[wait], rollout=RolloutConfig(max_turns=3))
    tasks = {name: Task(id=name, prompt=f"A {name.split('-')[0]} task.") for name in ("slow-c",)}
    new_tasks, asked = recording_source("fast-d", "fast-e", "fast-f")
    async with ToolClient(app=create_app([wait])) as tools:
        partial = two_groups_and_one_spare(scaffold, policy, tools, max_staleness_steps)
        partial.restore(json.loads(json.dumps(checkpoint)), tasks)
        with RolloutProgress() as progress:
            groups = await partial.collect(2, new_tasks, progress=progress)
        scheduled = {g.trajectories[0].group_id for g in groups} | {f"s{j.step}/{j.task.id}" for j in partial.carried}
        await partial.aclose()
    return groups, partial.stats, scheduled, asked, progress


async def test_a_resumed_run_reissues_its_carried_groups_before_new_tasks(tiny_tokenizer):
    policy = ScriptedPolicy(tiny_tokenizer, script)
    async with ToolClient(app=create_app([wait])) as tools:
        partial = PartialRollouts(
            ReactScaffold(tools=[wait], rollout=RolloutConfig(max_turns=3)),
            policy,
            tools,
            samples_per_prompt=2,
            groups_per_step=2,
            extra_groups=1,
        )
        await partial.collect(1, source("fast-a", "fast-b", "slow-c"))
        checkpoint = partial.carry_state()
        await partial.aclose()
    assert checkpoint == [{"task_id": "slow-c", "step": 1, "policy_version": 0}]

    groups, stats, scheduled, asked, progress = await resumed_step(tiny_tokenizer, checkpoint, version=1)
    assert asked == [2]  # the carried group took its place in the pool: one fewer new task than without it
    # it runs again under its original step (same group id and seeds) and is counted as restarted and carried on
    assert scheduled == {"s1/slow-c", "s2/fast-d", "s2/fast-e"}
    assert stats.restarted_groups == 1 and stats.dropped_stale_groups == 0
    restarted = [t for g in groups if g.task.id == "slow-c" for t in g.trajectories]
    assert all(t.policy_version == 1 for t in restarted)  # restarted from the prompt: on-policy again
    assert progress.total == 6 and progress.finished >= 4  # the restarted group's trajectories are counted too


async def test_a_restored_group_beyond_the_staleness_bound_is_dropped(tiny_tokenizer):
    checkpoint = [{"task_id": "slow-c", "step": 1, "policy_version": 0}]
    _, stats, scheduled, asked, _ = await resumed_step(tiny_tokenizer, checkpoint, version=2, max_staleness_steps=1)
    # exactly what the uninterrupted run would have done at this step: drop it, draw a new task in its place
    assert stats.dropped_stale_groups == 1 and stats.restarted_groups == 0
    assert asked == [3] and "s1/slow-c" not in scheduled


def test_a_trainer_resumed_from_its_checkpoint_schedules_what_the_uninterrupted_run_did(tmp_path):
    overrides = [
        "rollout.prompts_per_step=2",
        "rollout.samples_per_prompt=2",
        "rollout.extra_groups_per_step=2",
        "trainer.steps=3",
        "eval.every_steps=0",
        "progress=false",
        "tensorboard=false",
    ]
    cfg = load_config(None, overrides)
    first = Trainer(cfg, tmp_path)
    try:
        first.collect(1)
        carried = {f"s{job.step}/{job.task.id}" for job in first.partial.carried}
        first.state = TrainerState(step=1, wall_s=0.0, policy_version=first.policy.version)
        first.checkpoint(1, force=True)  # the run is killed after this checkpoint ...
        uninterrupted = scheduled_groups(first, 2)  # ... where it would have gone on like this
    finally:
        first.close()
    assert len(carried) == 2

    resumed = Trainer(cfg, tmp_path, resume=True)
    try:
        assert resumed.state.step == 1
        progress = RolloutProgress()
        after_resume = scheduled_groups(resumed, 2, progress)
        stats = resumed.partial.stats
    finally:
        resumed.close()
    assert carried <= after_resume and after_resume == uninterrupted
    assert stats.restarted_groups == 2
    assert progress.total == 8  # 4 groups of 2 in the pool, the 2 re-issued ones included


def scheduled_groups(trainer, step, progress=None) -> set[str]:
    """The group ids a step of `trainer` ran: the groups it returned and those it carries on."""
    groups, _ = trainer.collect(step, progress)
    return {g.trajectories[0].group_id for g in groups} | {f"s{j.step}/{j.task.id}" for j in trainer.partial.carried}
