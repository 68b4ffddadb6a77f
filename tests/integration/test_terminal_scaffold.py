"""The terminal scaffold in real bubblewrap sandboxes behind a real tool server on 127.0.0.1.

A scripted expert (the model double replaying each task's solution) solves every bundled task; answering at once,
forging the output files, or tampering with the shell solves none; a fork keeps the shell and the workspace;
`agentrl eval` runs the tasks over native tool calls; the checker composes with the judge PRM in one stack.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import time
from pathlib import Path

import pytest
from agentrl.scaffolds.terminal import TerminalFilesScaffold, TerminalScaffold
from agentrl.scaffolds.terminal.expert import expert_turns

from agentrl.config import RolloutConfig
from agentrl.reward import RewardStack
from agentrl.sandbox.config import SandboxConfig
from agentrl.testing import ScriptedPolicy, scripted_chat_app, serve_in_thread
from agentrl.toolserver.app import create_app
from agentrl.toolserver.client import ToolClient
from agentrl.toolserver.config import ToolServerConfig
from agentrl.types import StopReason, ToolCall

pytestmark = pytest.mark.integration

ROLLOUT = RolloutConfig(max_turns=8, max_new_tokens_per_turn=512, max_tokens_per_episode=16384)
SCAFFOLD = TerminalScaffold(rollout=ROLLOUT)
ALL_TASKS = [*SCAFFOLD.tasks("train"), *SCAFFOLD.tasks("test")]


@pytest.fixture(scope="module")
def tools_url():
    root = Path(tempfile.mkdtemp(prefix="agentrl-terminal-"))
    root.chmod(0o755)  # sandbox uids must reach their workspaces
    config = ToolServerConfig(sandbox=SandboxConfig(root_dir=str(root)))
    try:
        # The file-tools variant's toolsets include the plain scaffold's, so one server serves both.
        toolsets = TerminalFilesScaffold().toolsets()
        with serve_in_thread(create_app(list(toolsets), config=config)) as url:
            yield url
    finally:
        shutil.rmtree(root, ignore_errors=True)


def bash(command: str) -> str:
    return "<tool_call>\n" + json.dumps({"name": "bash", "arguments": {"command": command}}) + "\n</tool_call>"


async def play_all(url, tokenizer, turns_of):
    """Run every bundled task concurrently, each with its own scripted policy; (trajectory, seconds) per task."""

    async def one(tools, task):
        start = time.perf_counter()
        policy = ScriptedPolicy(tokenizer, turns_of(task))
        t = await SCAFFOLD.run(task, policy, tools, group_id=task.id, trajectory_id=f"{task.id}/0")
        return t, time.perf_counter() - start

    async with ToolClient(url) as tools:
        return await asyncio.gather(*(one(tools, task) for task in ALL_TASKS))


def test_bundled_tasks_cover_three_tiers_and_both_splits():
    tiers = [t.metadata["tier"] for t in ALL_TASKS]
    assert len(ALL_TASKS) >= 20 and len({t.id for t in ALL_TASKS}) == len(ALL_TASKS)
    for tier in ("easy", "medium", "hard"):
        assert {t.split for t in ALL_TASKS if t.metadata["tier"] == tier} == {"train", "test"}, tier
    assert tiers.count("hard") >= 5 and all(t.metadata["outputs"] for t in ALL_TASKS)


async def test_scripted_expert_solves_every_task(tools_url, tiny_tokenizer):
    played = await play_all(tools_url, tiny_tokenizer, expert_turns)
    stack = RewardStack.from_specs(["terminal_check"])
    failed = []
    for task, (t, seconds) in zip(ALL_TASKS, played, strict=True):
        scored = await stack.score(task, t)
        errors = [r.text for turn in t.turns for r in turn.tool_results if r.is_error]
        print(f"expert {task.id}: {len(task.metadata['expert'])} command(s), {seconds:.2f} s")
        if t.stop_reason is not StopReason.ANSWERED or scored.reward != 1.0 or errors:
            failed.append((task.id, t.stop_reason, t.error, scored.reward_components, errors))
    assert not failed


async def test_answering_at_once_solves_nothing(tools_url, tiny_tokenizer):
    played = await play_all(tools_url, tiny_tokenizer, lambda task: ["Done."])
    solved = [t.task_id for t, _ in played if t.measurements != {"terminal_check": 0.0}]
    assert all(t.stop_reason is StopReason.ANSWERED for t, _ in played) and not solved


def forge(task) -> list[str]:
    """Write every file the checker inspects, with the right name and wrong content, then claim success."""
    paths = task.metadata["outputs"]
    command = " && ".join(f"mkdir -p \"$(dirname '{p}')\" && rm -rf '{p}' && echo wrong > '{p}'" for p in paths)
    return [bash(command), "Done."]


async def test_checker_is_not_fooled_by_forged_outputs(tools_url, tiny_tokenizer):
    played = await play_all(tools_url, tiny_tokenizer, forge)
    wrote = [all(not r.is_error for turn in t.turns for r in turn.tool_results) for t, _ in played]
    fooled = [t.task_id for t, _ in played if t.measurements.get("terminal_check") != 0.0]
    assert all(wrote) and not fooled


async def test_shell_tricks_and_hidden_tools_do_not_reach_the_checker(tools_url, tiny_tokenizer):
    task = next(t for t in ALL_TASKS if t.id == "terminal/easy/hello")
    tricks = (
        "echo 'hello there' > hello.txt; printf 'import sys\\nsys.exit(0)\\n' | tee json.py > sitecustomize.py; "
        "python3() { return 0; }; export -f python3; export PYTHONPATH=/workspace PATH=/workspace:$PATH"
    )
    hidden = "<tool_call>\n" + json.dumps({"name": "terminal_check", "arguments": {"code": "pass"}}) + "\n</tool_call>"
    async with ToolClient(tools_url) as tools:
        policy = ScriptedPolicy(tiny_tokenizer, [bash(tricks), hidden, "Done."])
        t = await SCAFFOLD.run(task, policy, tools, group_id="g", trajectory_id="g/0")
    refused = t.turns[1].tool_results[0]
    assert refused.is_error and refused.error_type == "not_found"
    assert t.measurements == {"terminal_check": 0.0}


async def test_fork_mid_episode_keeps_cwd_env_and_files(tools_url):
    task = next(t for t in ALL_TASKS if t.id == "terminal/easy/hello")
    async with ToolClient(tools_url) as tools:
        session = await SCAFFOLD.open_episode(task, tools, SCAFFOLD.tool_names(task))
        call = lambda s, c: s.call(ToolCall("c" + str(time.perf_counter_ns()), "bash", {"command": c}))  # noqa: E731
        await call(session, "mkdir sub && cd sub && export MARK=kept && echo 'hello world' > ../hello.txt")
        fork = await session.fork()
        seen = await call(fork, 'pwd; echo "$MARK"; cat ../hello.txt')
        await call(fork, "echo changed > ../hello.txt")
        assert seen.text.splitlines() == ["/workspace/sub", "kept", "hello world"]
        assert await SCAFFOLD.finish_episode(task, session) == {"terminal_check": 1.0}
        assert await SCAFFOLD.finish_episode(task, fork) == {"terminal_check": 0.0}
        await fork.close()
        await session.close()


async def test_file_tools_variant_offers_the_file_editor(tools_url, tiny_tokenizer):
    scaffold = TerminalFilesScaffold(rollout=ROLLOUT)
    task = next(t for t in scaffold.tasks("train") if t.id == "terminal/easy/hello")
    assert {"bash", "create_file", "str_replace", "view"} <= set(scaffold.tool_names(task))
    create = {"name": "create_file", "arguments": {"path": "hello.txt", "content": "hello world\n"}}
    async with ToolClient(tools_url) as tools:
        policy = ScriptedPolicy(tiny_tokenizer, ["<tool_call>\n" + json.dumps(create) + "\n</tool_call>", "Done."])
        t = await scaffold.run(task, policy, tools, group_id="g", trajectory_id="g/0")
    assert not t.turns[0].tool_results[0].is_error and t.measurements == {"terminal_check": 1.0}


def expert_by_prompt(tasks):
    """A chat model double: finds the task in the conversation and plays its expert's next turn."""

    def reply(prompt: str) -> str:
        task = next(t for t in tasks if t.prompt in prompt)
        turns = expert_turns(task)
        return turns[min(prompt.count("<|im_start|>assistant") - 1, len(turns) - 1)]

    return reply


async def test_eval_with_native_tool_calls_against_a_scripted_chat_server(tiny_tokenizer, tmp_path):
    from agentrl.config import EvalRunConfig
    from agentrl.eval.runner import evaluate
    from agentrl.serve.app import create_app as create_serve_app
    from agentrl.serve.chat_completions import ChatService

    tasks = SCAFFOLD.tasks("test")
    service = ChatService(ScriptedPolicy(tiny_tokenizer, expert_by_prompt(tasks)), ("scripted",))
    with serve_in_thread(create_serve_app(service)) as url:
        config = EvalRunConfig(
            scaffold="terminal",
            model="scripted",
            base_url=url + "/v1",
            format="native",
            max_turns=8,
            output=str(tmp_path / "terminal.jsonl"),
        )
        outcome = await evaluate(config)
    assert outcome.summary["infra_errors"] == 0 and outcome.summary["episodes"] == len(tasks)
    assert outcome.summary["tool_calls"] > 0
    assert [r.success for r in outcome.records] == [True] * len(tasks)


async def test_checker_composes_with_the_judge_prm(tools_url, tiny_tokenizer, monkeypatch):
    task = next(t for t in ALL_TASKS if t.id == "terminal/easy/hello")
    with serve_in_thread(scripted_chat_app(lambda messages: "progress \\boxed{1}")) as judge_url:
        monkeypatch.setenv("AGENTRL_JUDGE_MODEL", "judge")
        monkeypatch.setenv("AGENTRL_JUDGE_BASE_URL", judge_url + "/v1")
        stack = RewardStack.from_specs(["terminal_check", "judge_prm:0.1"])
        async with ToolClient(tools_url) as tools:
            policy = ScriptedPolicy(tiny_tokenizer, expert_turns(task))
            t = await SCAFFOLD.run(task, policy, tools, group_id="g", trajectory_id="g/0")
        scored = await stack.score(task, t)
    assert scored.reward == 1.0 and scored.reward_components == {"terminal_check": 1.0}
    assert scored.turns[0].reward_components == {"judge_prm": 1.0} and scored.turns[0].reward == pytest.approx(0.1)
