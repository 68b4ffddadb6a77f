"""The `agent` scaffold: a user's OpenAI-client agent as the rollout of `agentrl train`, recorded token-exact
through the gateway over the trainer's own policy."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap

import httpx
import pytest

from agentrl.reward import RewardStack
from agentrl.testing import ScriptedPolicy
from agentrl.types import StopReason, Task

pytestmark = pytest.mark.integration

SYSTEM = "Use the tools. Reply with only the final answer."
CALL = '<tool_call>\n{"name": "calculate", "arguments": {"expression": "6 * 7"}}\n</tool_call>'
TASK = Task("six-sevens", "What is 6 * 7?", "42")

USER_FILE = '''
"""A user's agent, written against the plain openai client: a tool loop with a local Python tool."""

import json

from agentrl.scaffolds.agent import AgentScaffold
from agentrl.scaffolds.code.tools import calculate

SYSTEM = "Use the tools. Reply with only the final answer."


async def agent(task, client, model):
    messages = [{{"role": "system", "content": SYSTEM}}, {{"role": "user", "content": task.prompt}}]
    for _ in range(3):
        response = await client.chat.completions.create(model=model, messages=messages, tools=[calculate.schema])
        message = response.choices[0].message
        answer = None if message.tool_calls else message.content
        with open({log!r}, "a") as log:  # what the gateway says it sampled, to hold the trajectories against
            log.write(json.dumps({{"task": task.id, "answer": answer, **response.model_extra["agentrl"]}}) + "\\n")
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            return message.content
        for call in message.tool_calls:
            result = await calculate.call(call.function.arguments)
            messages.append({{"role": "tool", "tool_call_id": call.id, "content": result.text}})
    return None


class Calculator(AgentScaffold):
    def __init__(self, *, rollout=None):
        super().__init__(agent=agent, tasks={tasks!r}, rollout=rollout)
'''


def write_tasks(path, n_train: int = 6, n_test: int = 2) -> None:
    from agentrl.scaffolds.code import tasks

    rows = [
        {"id": t.id, "prompt": t.prompt, "answer": t.answer, "split": split}
        for split, n in (("train", n_train), ("test", n_test))
        for t in tasks.tasks(split)[:n]
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows))


def test_a_plain_openai_agent_trains_online_through_the_cli(tmp_path):
    log = tmp_path / "calls.jsonl"
    write_tasks(tmp_path / "tasks.jsonl")
    user_file = USER_FILE.format(log=str(log), tasks=str(tmp_path / "tasks.jsonl"))
    (tmp_path / "myagent.py").write_text(textwrap.dedent(user_file))
    args = [
        "scaffold=myagent:Calculator", "trainer.steps=2", "trainer.lr=1e-4",
        "rollout.prompts_per_step=2", "rollout.samples_per_prompt=3", "rollout.max_turns=3",
        "eval.every_steps=0", "progress=false", "tensorboard=false", f"output_dir={tmp_path}", "name=run",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run([sys.executable, "-m", "agentrl.cli.app", "train", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]

    calls = [json.loads(line) for line in log.read_text().splitlines()]
    sampled = {(c["policy_version"], tuple(c["prompt_token_ids"]), tuple(c["token_ids"][0])) for c in calls}
    answers = {c["answer"] for c in calls if c["answer"] is not None}
    metrics = {m["step"]: m for m in map(json.loads, (tmp_path / "run" / "metrics.jsonl").read_text().splitlines())}
    gold = {json.loads(line)["id"]: json.loads(line)["answer"] for line in (tmp_path / "tasks.jsonl").open()}
    for step in (1, 2):
        trajectories = [json.loads(x) for x in (tmp_path / "run" / "trajectories" / f"step_{step:06d}.jsonl").open()]
        assert len(trajectories) == 6 and not [t["error"] for t in trajectories if t["stop_reason"] == "infra_error"]
        for t in trajectories:
            assert t["policy_version"] == step - 1  # each step samples with the weights of the step before
            context = list(t["prompt_ids"])
            for turn in t["turns"]:  # token-exact: every turn is one call the gateway sampled, from that very prefix
                assert (step - 1, tuple(context), tuple(turn["completion_ids"])) in sampled
                context += turn["completion_ids"] + turn["observation_ids"]
            assert t["answer"] is None or t["answer"] in answers
            assert t["reward_components"]["exact_match"] == float(t["answer"] == gold[t["task_id"]])
            assert t["measurements"]["agent_episodes"] == 1.0
        assert any(turn["tool_calls"] and turn["tool_results"] for t in trajectories for turn in t["turns"])
        # the learner scores the recorded ids as the sampler did
        if metrics[step].get("train/skipped") != 1.0:
            assert metrics[step]["train/sampler_logprob_abs_diff"] < 0.02
    assert any(metrics[s].get("train/skipped") != 1.0 for s in (1, 2)), "no step trained"


def test_scaffold_agent_builds_from_the_run_config(tmp_path):
    from agentrl.scaffolds.agent import AgentScaffold

    from agentrl.config import load_config
    from agentrl.errors import ConfigError

    write_tasks(tmp_path / "tasks.jsonl")
    (tmp_path / "myagent2.py").write_text(textwrap.dedent(USER_FILE.format(log="unused", tasks="unused")))
    sys.path.insert(0, str(tmp_path))
    try:
        config = load_config(None, ["scaffold=agent", "agent=myagent2:agent", f"tasks={tmp_path / 'tasks.jsonl'}"])
        scaffold = AgentScaffold.from_config(config)
        assert len(scaffold.tasks("train")) == 6 and scaffold.reward_names() == ("exact_match",)
        assert scaffold.rollout == config.rollout and scaffold.model_name == config.policy.model
        with pytest.raises(ConfigError, match="agent="):
            AgentScaffold.from_config(load_config(None, ["scaffold=agent"]))
        with pytest.raises(ConfigError, match="async"):
            AgentScaffold(agent=lambda task, client, model: None)
    finally:
        sys.path.remove(str(tmp_path))


SDK_FILE = '''
"""A user's agent written with the OpenAI Agents SDK, unchanged but for the client it is given."""

import json

from agentrl.scaffolds.agent import AgentScaffold
from agentrl.scaffolds.code.tools import evaluate, format_number
from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled

set_tracing_disabled(True)


@function_tool
def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression.

    Args:
        expression: The expression, e.g. 12 * (3 + 4).
    """
    try:
        return format_number(evaluate(expression))
    except ValueError as e:
        return f"error: {{e}}"


async def agent(task, client, model):
    calculator = Agent(
        name="calculator",
        instructions="Use the tools. Reply with only the final answer.",
        tools=[calculate],
        model=OpenAIChatCompletionsModel(model=model, openai_client=client),
        model_settings=ModelSettings(max_tokens=64),
    )
    result = await Runner.run(calculator, task.prompt, max_turns=3)
    with open({log!r}, "a") as log:
        log.write(json.dumps({{"task": task.id, "answer": str(result.final_output)}}) + "\\n")
    return str(result.final_output)


class SdkCalculator(AgentScaffold):
    def __init__(self, *, rollout=None):
        super().__init__(agent=agent, tasks={tasks!r}, rollout=rollout)
'''


def test_an_openai_agents_sdk_agent_trains_online(tmp_path, monkeypatch):
    from agentrl.config import load_config
    from agentrl.trainer import Trainer

    write_tasks(tmp_path / "tasks.jsonl")
    log = tmp_path / "answers.jsonl"
    (tmp_path / "sdkagent.py").write_text(SDK_FILE.format(log=str(log), tasks=str(tmp_path / "tasks.jsonl")))
    monkeypatch.syspath_prepend(str(tmp_path))
    config = load_config(None, [
        "scaffold=sdkagent:SdkCalculator", "trainer.steps=1", "trainer.lr=1e-4",
        "rollout.prompts_per_step=2", "rollout.samples_per_prompt=3", "rollout.max_turns=3",
        "eval.every_steps=0", "progress=false", "tensorboard=false", f"output_dir={tmp_path}", "name=run",
    ])  # fmt: skip
    stats = Trainer(config, tmp_path / "run").run()

    trajectories = [json.loads(x) for x in (tmp_path / "run" / "trajectories" / "step_000001.jsonl").open()]
    assert len(trajectories) == 6 and not [t["error"] for t in trajectories if t["stop_reason"] == "infra_error"]
    answers = [json.loads(line) for line in log.read_text().splitlines()]
    assert sorted((a["task"], a["answer"]) for a in answers) == sorted(
        (t["task_id"], t["answer"]) for t in trajectories if t["stop_reason"] == "answered"
    )
    assert any(turn["tool_calls"] and turn["tool_results"] for t in trajectories for turn in t["turns"])
    assert all(t["measurements"]["agent_episodes"] == 1.0 for t in trajectories)
    assert "reward/exact_match" in stats
    if stats.get("train/skipped") != 1.0:  # token-exact: the learner scores the SDK's turns as the sampler did
        assert stats["train/sampler_logprob_abs_diff"] < 0.02


# --- how an episode ends, over a scripted model -----------------------------------------------------------


class CountingPolicy(ScriptedPolicy):
    """The scripted model, remembering the sampling parameters of every call."""

    def __init__(self, tokenizer, responses, *, fail: bool = False):
        super().__init__(tokenizer, responses)
        self.params, self.fail = [], fail

    async def generate(self, prompt_ids, params):
        self.params.append(params)
        if self.fail:
            raise RuntimeError("device lost")
        return await super().generate(prompt_ids, params)


def scripted(prompt: str) -> str:
    return "42" if "<tool_response>" in prompt else CALL


async def tool_loop(task, client, model, *, edit=False, side_call=False, swallow=False):
    """The plain tool loop, with the ways an agent can go wrong as switches."""
    from agentrl.scaffolds.code.tools import calculate

    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task.prompt}]
    if side_call:  # a conversation of its own, before the one that answers
        plan = [{"role": "user", "content": "Plan: " + task.prompt}]
        await client.chat.completions.create(model=model, messages=plan)
    for _ in range(4):
        try:
            response = await client.chat.completions.create(
                model="gpt-4o", messages=messages, tools=[calculate.schema], temperature=0.2, max_tokens=5000, seed=7
            )
        except Exception as e:
            if swallow:
                return f"failed: {e}"
            raise
        message = response.choices[0].message.model_dump(exclude_none=True)
        if edit and message.get("tool_calls"):
            message["tool_calls"][0]["function"]["arguments"] = json.dumps({"expression": "7 * 6"})
        messages.append(message)
        if not message.get("tool_calls"):
            return message["content"]
        for call in message["tool_calls"]:
            result = await calculate.call(call["function"]["arguments"])
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result.text})
    return None


async def episode(tokenizer, agent, *, fail=False, responses=scripted, **rollout):
    from agentrl.scaffolds.agent import AgentScaffold

    from agentrl.config import RolloutConfig

    policy = CountingPolicy(tokenizer, responses, fail=fail)
    scaffold = AgentScaffold(agent=agent, tasks=[TASK], rollout=RolloutConfig(**rollout))
    trajectory = await scaffold.run(TASK, policy, None, group_id="g", trajectory_id="g/0", seed=3)
    (scored,), _ = await RewardStack.from_specs(["exact_match"]).score_batch([(TASK, trajectory)])
    return scored, policy


async def test_the_answer_the_agent_returns_is_scored_and_sampling_follows_the_rollout(tiny_tokenizer):
    trajectory, policy = await episode(tiny_tokenizer, tool_loop, temperature=0.7, max_new_tokens_per_turn=48)
    assert trajectory.stop_reason is StopReason.ANSWERED and trajectory.answer == "42" and trajectory.reward == 1.0
    assert [len(t.tool_calls) for t in trajectory.turns] == [1, 0]
    assert trajectory.turns[0].tool_results[0].text == "42"
    assert trajectory.task_id == "six-sevens" and trajectory.trajectory_id == "g/0"
    # the agent asked for temperature 0.2, 5000 tokens and seed 7 of "gpt-4o": the rollout decides
    assert {(p.temperature, p.max_new_tokens) for p in policy.params} == {(0.7, 48)}
    assert len({p.seed for p in policy.params}) == 2 and 7 not in {p.seed for p in policy.params}


async def test_an_agent_that_raises_is_its_own_failure_and_scores_zero(tiny_tokenizer):
    async def crashes(task, client, model):
        await client.chat.completions.create(model=model, messages=[{"role": "user", "content": task.prompt}])
        raise ValueError("my parser choked")

    trajectory, _ = await episode(tiny_tokenizer, crashes)
    assert trajectory.stop_reason is StopReason.TOOL_FAILURE and trajectory.answer is None
    assert "ValueError: my parser choked" in trajectory.error and trajectory.reward == 0.0
    assert trajectory.measurements["agent_error"] == 1.0 and len(trajectory.turns) == 1


async def test_transport_and_sampler_failures_are_infra_errors_never_zero_rewards(tiny_tokenizer):
    async def unreachable(task, client, model):
        await client.chat.completions.create(model=model, messages=[{"role": "user", "content": task.prompt}])
        async with httpx.AsyncClient() as own:  # the agent's own service is down
            await own.get("http://127.0.0.1:9/")

    trajectory, _ = await episode(tiny_tokenizer, unreachable)
    assert trajectory.stop_reason is StopReason.INFRA_ERROR and "ConnectError" in trajectory.error
    assert trajectory.reward is None

    async def swallows(task, client, model):
        return await tool_loop(task, client, model, swallow=True)

    # the sampler fails; the agent swallows the error and answers anyway: still not the policy's failure
    trajectory, _ = await episode(tiny_tokenizer, swallows, fail=True)
    assert trajectory.stop_reason is StopReason.INFRA_ERROR and "device lost" in trajectory.error
    assert trajectory.reward is None


async def test_edited_model_output_is_excluded_not_trained_on(tiny_tokenizer):
    async def edits(task, client, model):
        return await tool_loop(task, client, model, edit=True)

    trajectory, _ = await episode(tiny_tokenizer, edits)
    assert trajectory.stop_reason is StopReason.INFRA_ERROR and trajectory.error.startswith("history mismatch")
    assert trajectory.reward is None


async def test_limits_of_the_rollout_end_the_episode(tiny_tokenizer):
    trajectory, policy = await episode(tiny_tokenizer, tool_loop, responses=[CALL], max_turns=2)
    assert trajectory.stop_reason is StopReason.MAX_TURNS and len(trajectory.turns) == 2 and len(policy.params) == 2
    assert "max_turns" in trajectory.error and trajectory.reward == 0.0

    # the episode's token budget: a last turn cut short, or a call whose prompt is already past it, refused
    refused = 0
    for budget in range(60, 130, 6):
        trajectory, _ = await episode(tiny_tokenizer, tool_loop, responses=[CALL], max_tokens_per_episode=budget)
        assert trajectory.stop_reason is StopReason.MAX_TOKENS and len(trajectory.token_ids) <= budget
        refused += "context window" in (trajectory.error or "")
    assert 0 < refused < len(range(60, 130, 6))


async def test_several_conversations_train_on_the_one_that_answered(tiny_tokenizer):
    async def plans_first(task, client, model):
        return await tool_loop(task, client, model, side_call=True)

    trajectory, _ = await episode(tiny_tokenizer, plans_first)
    assert trajectory.measurements["agent_episodes"] == 2.0
    assert trajectory.answer == "42" and [len(t.tool_calls) for t in trajectory.turns] == [1, 0]
    assert "Plan:" not in tiny_tokenizer.decode(list(trajectory.prompt_ids))


async def test_an_agent_that_never_calls_the_model_has_nothing_to_train(tiny_tokenizer):
    async def lazy(task, client, model):
        await asyncio.sleep(0)
        return "42"

    trajectory, _ = await episode(tiny_tokenizer, lazy)
    assert trajectory.stop_reason is StopReason.INFRA_ERROR and "no model call" in trajectory.error
