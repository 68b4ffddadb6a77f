"""ARPO/AEPO branching through the real rollout path: forks share their token prefix and their tool state.

The tool state test runs the sandboxed `python` tool through a real tool server (in-process ASGI transport,
bubblewrap sandboxes); the budget tests use the stamped echo tool.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from agentrl.scaffolds.react import ReactScaffold

from agentrl.branching import BranchRule
from agentrl.config import RolloutConfig
from agentrl.rollout import BranchingCollector, collect_groups
from agentrl.sandbox.config import SandboxConfig
from agentrl.testing import ScriptedPolicy, echo
from agentrl.tool_client import ToolClient
from agentrl.tool_server import create_app
from agentrl.tool_server_config import ToolServerConfig
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
