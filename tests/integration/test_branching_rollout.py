"""ARPO/AEPO branching through the real rollout path: forks share their token prefix and their tool state.

The tool state test runs the sandboxed `python` tool through a real tool server (in-process ASGI transport,
bubblewrap sandboxes); the budget tests use the stamped echo tool. The timeout and cancellation tests serve the
tools with uvicorn on 127.0.0.1 and count the sessions left open on the server.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from pathlib import Path

import pytest
from agentrl.scaffolds.react import ReactScaffold

from agentrl.config import RolloutConfig
from agentrl.rollout.branching import BranchRule
from agentrl.rollout.collect import BranchingCollector, collect_groups, trajectory_seed
from agentrl.runlog.progress import RolloutProgress
from agentrl.sandbox.config import SandboxConfig
from agentrl.testing import ScriptedPolicy, echo, serve_in_thread
from agentrl.tool import tool
from agentrl.toolserver.app import create_app
from agentrl.toolserver.client import ToolClient
from agentrl.toolserver.config import ToolServerConfig
from agentrl.types import StopReason, Task

pytestmark = pytest.mark.integration

SHOW = "print(sorted(k for k in globals() if k == 'x' or k.startswith('mark_')))"


def call(name: str, **arguments) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


class SeededScript:
    """A model double whose turn k may depend on the episode's sampling seed, so branches say different things."""

    def __init__(self, tokenizer, script):
        self.tokenizer, self.script, self.version = tokenizer, script, 0

    async def generate(self, prompt_ids, params):
        turn = self.tokenizer.decode(list(prompt_ids), skip_special_tokens=False).count("<|im_start|>assistant") - 1
        return await ScriptedPolicy(self.tokenizer, [self.script(turn, params.seed)]).generate(prompt_ids, params)


@pytest.fixture
def sandbox_root():
    root = Path(tempfile.mkdtemp(prefix="agentrl-test-"))
    root.chmod(0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def python_script(turn: int, seed: int) -> str:
    if turn == 0:
        return call("python", code="x = 41")
    if turn == 1:
        return call("python", code=f"mark_{seed % 10**6} = 1\n{SHOW}")
    if turn == 2:
        return call("python", code=f"# {seed}\n{SHOW}")
    return "done"


def prefix_length(trajectory, turns: int) -> int:
    return len(trajectory.prompt_ids) + sum(
        len(t.completion_ids) + len(t.observation_ids) for t in trajectory.turns[:turns]
    )


async def test_forks_share_the_token_prefix_and_the_sandbox_state(tiny_tokenizer, sandbox_root):
    app = create_app(
        ["agentrl.tools.code:PythonInterpreter"],
        config=ToolServerConfig(sandbox=SandboxConfig(root_dir=str(sandbox_root))),
    )
    scaffold = ReactScaffold(
        tools=["agentrl.tools.code:PythonInterpreter"], rollout=RolloutConfig(max_turns=4, max_new_tokens_per_turn=256)
    )
    # τ = 1 makes every fork test pass, so the budget alone decides: one rollout from the prompt, three forks
    rule = BranchRule(rollouts_per_task=4, initial_rollouts=1, beam_size=2, threshold=1.0)
    task = Task(id="t/0", prompt="Set x, mark the namespace, show it.")
    async with ToolClient(app=app) as tools:
        [group] = await collect_groups(
            scaffold,
            [task],
            SeededScript(tiny_tokenizer, python_script),
            tools,
            samples_per_prompt=4,
            step=1,
            seed=0,
            branching=rule,
        )
    trajectories = {t.trajectory_id: t for t in group.trajectories}
    assert len(trajectories) == 4
    assert all(t.stop_reason is StopReason.ANSWERED for t in trajectories.values()), [
        t.error for t in trajectories.values()
    ]
    forks = [t for t in trajectories.values() if t.parent_id is not None]
    assert len(forks) == 3 and {t.branch_turn for t in forks} == {1, 2}
    for child in forks:
        parent = trajectories[child.parent_id]
        shared = prefix_length(parent, child.branch_turn)
        assert prefix_length(child, child.branch_turn) == shared
        assert child.token_ids[:shared] == parent.token_ids[:shared]  # byte-identical prefix
        assert child.turns[: child.branch_turn] == parent.turns[: child.branch_turn]
        assert child.turns[child.branch_turn].completion_ids != parent.turns[child.branch_turn].completion_ids
    for t in trajectories.values():
        mark = t.turns[1].tool_calls[0].arguments["code"].split(" = ")[0]
        # x was set before every fork: visible everywhere. The mark of turn 1 was set in this trajectory's own
        # lineage only: a branch forked before turn 1 does not see its parent's mark, nor the parent its branch's.
        assert t.turns[2].tool_results[0].text == str(sorted(["x", mark]))
    marks = {t.turns[1].tool_calls[0].arguments["code"].split(" = ")[0] for t in trajectories.values()}
    # one mark per trajectory that sampled turn 1 itself: the root and the branches forked before it
    assert len(marks) == sum(t.branch_turn in (None, 1) for t in trajectories.values())


def echo_script(turn: int, seed: int) -> str:
    return call("echo", text=f"step {turn}") if turn < 3 else "done"


@pytest.mark.parametrize("mode", ["arpo", "aepo"])
async def test_every_task_gets_exactly_k_rollouts(tiny_tokenizer, mode):
    app = create_app([echo])
    scaffold = ReactScaffold(tools=[echo], rollout=RolloutConfig(max_turns=4, max_new_tokens_per_turn=256))
    rule = BranchRule(mode=mode, rollouts_per_task=6, initial_rollouts=2, beam_size=3)
    tasks = [Task(id=f"t/{i}", prompt=f"Echo three times ({i}).") for i in range(5)]
    async with ToolClient(app=app) as tools:
        collector = BranchingCollector(
            scaffold, SeededScript(tiny_tokenizer, echo_script), tools, rule, step=3, seed=1, gate=_gate()
        )
        groups = [await collector.group(task) for task in tasks]
    for group in groups:
        ids = [t.trajectory_id for t in group.trajectories]
        assert len(ids) == 6 and ids == [f"s3/{group.task.id}/{i}" for i in range(6)]
        assert all(t.stop_reason is StopReason.ANSWERED for t in group.trajectories)
        roots = [t for t in group.trajectories if t.parent_id is None]
        assert len(roots) >= 2  # m started from the prompt (more only when every rollout ended with slots left)
    decisions = collector.state.decisions
    assert decisions and any(d.forked for d in decisions) and any(not d.forked for d in decisions)
    # at most b − 1 fork tests per rollout per tool round
    per_round = {}
    for d in decisions:
        per_round[(d.trajectory_id, d.turn)] = per_round.get((d.trajectory_id, d.turn), 0) + 1
    assert max(per_round.values()) <= 2


async def test_aepo_pre_monitoring_starts_with_one_rollout_that_never_forks(tiny_tokenizer):
    app = create_app([echo])
    scaffold = ReactScaffold(tools=[echo], rollout=RolloutConfig(max_turns=4, max_new_tokens_per_turn=256))
    rule = BranchRule(mode="aepo", rollouts_per_task=6, initial_rollouts=3, dynamic_initial=True, threshold=0.0)
    task = Task(id="t/0", prompt="Echo three times.")
    async with ToolClient(app=app) as tools:
        collector = BranchingCollector(
            scaffold, SeededScript(tiny_tokenizer, echo_script), tools, rule, step=1, seed=0, gate=_gate()
        )
        group = await collector.group(task)
    assert len(group.trajectories) == 6
    monitor = group.trajectories[0]
    assert monitor.parent_id is None and not [
        d for d in collector.state.decisions if d.trajectory_id == monitor.trajectory_id
    ]
    # constant entropies: H_root = H̄_tool, so m = int(6·σ(0)) + 1 = 4 rollouts from the prompt, 2 forks
    assert collector.state.budgets["t/0"].m == 4
    assert sum(t.parent_id is None for t in group.trajectories) == 4


def _gate():
    import asyncio

    return asyncio.Semaphore(64)


# --- timeouts and cancellation (real tool server on 127.0.0.1) -------------------------------------------------


@tool
async def wait(seconds: float) -> str:
    """Wait, then say so.

    Args:
        seconds: How long to wait.
    """
    await asyncio.sleep(seconds)
    return "waited"


class SlowFirstFork:
    """A toolset whose first fork on the server takes `FORK_S` (a slow sandbox copy, say); later forks are quick."""

    forks = 0

    @tool
    def note(self, text: str) -> str:
        """Note the text.

        Args:
            text: What to note.
        """
        return f"noted {text}"

    async def fork(self) -> SlowFirstFork:
        type(self).forks += 1
        if type(self).forks == 1:
            await asyncio.sleep(FORK_S)
        return SlowFirstFork()


FORK_S = 3.0
ECHO_THEN_DONE = ["echo", "echo", "echo", "done"]


def scripted(plan):
    """A policy script: turn k of the trajectory with sampling seed s does `plan(s, k)` (`echo`, `note`, `hang`,
    `done`)."""

    def script(turn: int, seed: int) -> str:
        action = plan(seed, turn)
        if action == "hang":
            return call("wait", seconds=60)
        if action == "done":
            return "done"
        return call(action, text=f"turn {turn}")

    return script


def turn_seeds(*indices: int) -> set[int]:
    """The sampling seeds of every turn of rollouts `indices` of task t/0 in step 1 (the react episode's rule)."""
    return {(trajectory_seed(0, 1, "t/0", i) * 1009 + k) % 2**62 for i in indices for k in range(4)}


def open_sessions(app) -> int:
    return len(app.state.tool_server.sessions)


async def collect_one_group(tokenizer, client, tools, plan, *, timeout_s, max_concurrent=8, progress=None):
    scaffold = ReactScaffold(tools=tools, rollout=RolloutConfig(max_turns=4, max_new_tokens_per_turn=256))
    rule = BranchRule(rollouts_per_task=4, initial_rollouts=1, beam_size=2, threshold=1.0)  # every fork test passes
    [group] = await collect_groups(
        scaffold,
        [Task(id="t/0", prompt="Work in steps.")],
        SeededScript(tokenizer, scripted(plan)),
        client,
        samples_per_prompt=4,
        step=1,
        seed=0,
        branching=rule,
        timeout_s=timeout_s,
        max_concurrent=max_concurrent,
        progress=progress,
    )
    return group


async def test_a_branch_past_its_timeout_is_an_infrastructure_failure_and_its_session_closes(tiny_tokenizer):
    hang = turn_seeds(2, 3)  # forks: they sample their own turns from their own seeds

    def plan(seed, turn):
        return "hang" if seed in hang and turn > 0 else ECHO_THEN_DONE[turn]

    app = create_app([echo, wait])
    with serve_in_thread(app) as url, RolloutProgress() as progress:
        async with ToolClient(url) as client:
            group = await asyncio.wait_for(
                collect_one_group(tiny_tokenizer, client, [echo, wait], plan, timeout_s=2.0, progress=progress), 30
            )
            leftover = open_sessions(app)  # before the client's own cleanup would close what the engine left
    by_index = {int(t.trajectory_id.rsplit("/", 1)[1]): t for t in group.trajectories}
    assert sorted(by_index) == [0, 1, 2, 3]
    for i in (2, 3):
        assert by_index[i].stop_reason is StopReason.INFRA_ERROR
        assert "trajectory_timeout_s=2" in by_index[i].error and by_index[i].parent_id is not None
    assert all(by_index[i].stop_reason is StopReason.ANSWERED for i in (0, 1))
    assert [t.trajectory_id for t in group.valid] == ["s1/t/0/0", "s1/t/0/1"]  # the group's statistics skip them
    assert leftover == 0  # the timed-out branches' sessions were closed (their hanging calls with them)
    assert (progress.total, progress.finished, progress.failed) == (4, 4, 2)


async def test_a_rollout_timing_out_mid_fork_still_launches_its_branch(tiny_tokenizer):
    SlowFirstFork.forks = 0

    def plan(seed, turn):
        return ["note", "note", "note", "done"][turn]

    app = create_app([SlowFirstFork])
    with serve_in_thread(app) as url:
        async with ToolClient(url) as client:
            group = await asyncio.wait_for(
                collect_one_group(tiny_tokenizer, client, [SlowFirstFork], plan, timeout_s=FORK_S / 2), 30
            )
            leftover = open_sessions(app)
    by_index = {int(t.trajectory_id.rsplit("/", 1)[1]): t for t in group.trajectories}
    assert sorted(by_index) == [0, 1, 2, 3]  # the slot reserved for the fork was filled; the group completed
    root, branch = by_index[0], by_index[1]
    assert root.stop_reason is StopReason.INFRA_ERROR and "trajectory_timeout_s" in root.error
    # the fork the root was making when its time ran out became a branch of its own, on its own clock
    assert branch.parent_id == root.trajectory_id and branch.branch_turn == 1
    assert branch.stop_reason is StopReason.ANSWERED
    assert leftover == 0


async def test_an_abandoned_group_closes_the_sessions_of_branches_still_waiting_for_a_slot(tiny_tokenizer):
    root = turn_seeds(0)

    def plan(seed, turn):  # the root forks after turn 0, then hangs while holding the only slot
        return "hang" if seed in root and turn == 1 else ECHO_THEN_DONE[turn]

    app = create_app([echo, wait])
    before = set(asyncio.all_tasks())
    with serve_in_thread(app) as url:
        async with ToolClient(url) as client:
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(
                    collect_one_group(tiny_tokenizer, client, [echo, wait], plan, timeout_s=0, max_concurrent=1), 2.0
                )
            leftover = open_sessions(app)
    assert leftover == 0  # neither the root's session nor the forked one of the branch that never got a slot
    assert set(asyncio.all_tasks()) <= before  # no rollout task outlives its group
