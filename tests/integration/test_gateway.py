"""The recording gateway (`agentrl serve --record`) with the openai SDK and the OpenAI Agents SDK on 127.0.0.1."""

import json

import pytest
import torch

from agentrl.rollout.chat import ChatFormat, template_mismatch
from agentrl.serve.app import build_service, create_app
from agentrl.serve.chat_completions import ChatService
from agentrl.serve.recorded import load_recorded, recorded_groups, train_recorded_step
from agentrl.serve.recorder import SessionRecorder
from agentrl.testing import ScriptedPolicy, serve_in_thread
from agentrl.types import Completion

pytestmark = pytest.mark.integration

CALL = '<tool_call>\n{"name": "calculate", "arguments": {"expression": "6 * 7"}}\n</tool_call>'
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "calculate",
            "description": "Evaluate arithmetic.",
            "parameters": {
                "type": "object",
                "properties": {"expression": {"type": "string"}},
                "required": ["expression"],
            },
        },
    }
]
QUESTION = [{"role": "system", "content": "Use the tools."}, {"role": "user", "content": "What is 6 * 7?"}]


def scripted(prompt: str) -> str:
    return "42" if "<tool_response>" in prompt else CALL


@pytest.fixture
def gateway(tiny_tokenizer, tmp_path):
    recorder = SessionRecorder(tiny_tokenizer, tmp_path / "rec")
    service = ChatService(ScriptedPolicy(tiny_tokenizer, scripted), ("scripted",), recorder=recorder)
    with serve_in_thread(create_app(service)) as url:
        yield url, recorder


def tool_session(client, *, edit_arguments: bool = False):
    first = client.chat.completions.create(model="scripted", messages=QUESTION, tools=TOOLS)
    message = first.choices[0].message.model_dump(exclude_none=True)
    if edit_arguments:
        message["tool_calls"][0]["function"]["arguments"] = json.dumps({"expression": "7 * 6"})
    history = QUESTION + [message, {"role": "tool", "tool_call_id": message["tool_calls"][0]["id"], "content": "42"}]
    second = client.chat.completions.create(model="scripted", messages=history, tools=TOOLS)
    return first, second


def test_a_session_is_one_token_exact_trajectory_with_rewards(gateway, tiny_tokenizer):
    import httpx
    from openai import OpenAI

    url, recorder = gateway
    client = OpenAI(base_url=url + "/v1", api_key="key-1")
    first, second = tool_session(client)
    assert first.model_extra["agentrl"]["episode_id"] == second.model_extra["agentrl"]["episode_id"] == "key-1/0"
    assert second.model_extra["agentrl"]["turn"] == 1 and second.choices[0].message.content == "42"
    (episode,) = recorder.episodes("key-1")
    trajectory = episode.trajectory()
    assert len(trajectory.turns) == 2 and trajectory.turns[0].tool_calls[0].name == "calculate"
    assert template_mismatch(ChatFormat(tiny_tokenizer, TOOLS), trajectory) is None and not episode.mismatches
    # the second request's prompt is exactly the recorded ids so far: the model saw what the learner will score
    assert (
        second.model_extra["agentrl"]["prompt_token_ids"]
        == trajectory.token_ids[: -len(trajectory.turns[1].completion_ids)]
    )
    assert sum(trajectory.loss_mask) == sum(len(t.completion_ids) for t in trajectory.turns)
    r = httpx.post(f"{url}/v1/sessions/key-1/reward", json={"reward": 0.5, "turn": 0})
    assert r.status_code == 200 and r.json()["turn_rewards"] == [0.5, None]
    assert httpx.post(f"{url}/v1/sessions/key-1/reward", json={"reward": 1}).json()["reward"] == 1.0
    assert httpx.post(f"{url}/v1/sessions/nobody/reward", json={"reward": 1}).status_code == 404
    listed = httpx.get(f"{url}/v1/sessions").json()["sessions"]
    assert listed == [{"session_id": "key-1", "episodes": 1, "turns": 2, "mismatches": 0}]
    saved = load_recorded(recorder.directory)
    assert saved[0]["trajectory"]["reward"] == 1.0 and saved[0]["trajectory"]["prompt_ids"] == list(
        trajectory.prompt_ids
    )


def test_rewritten_history_is_reported_and_kept_out_of_training(gateway):
    from openai import OpenAI

    url, recorder = gateway
    client = OpenAI(base_url=url + "/v1", api_key="k", default_headers={"X-Session-Id": "edited"})
    _, second = tool_session(client, edit_arguments=True)
    mismatches = second.model_extra["agentrl"]["mismatches"]
    assert [m["kind"] for m in mismatches] == ["history"] and mismatches[0]["message_index"] == 2
    assert "6 * 7" in mismatches[0]["expected"] and "7 * 6" in mismatches[0]["got"]
    for k in range(2):
        recorder.set_reward("edited", 1.0, episode=k)
    groups, report = recorded_groups(recorder.episodes())
    assert report["history_mismatch"] == ["edited/1"] and report["trainable"] == 1
    assert [t.trajectory_id for g in groups for t in g.trajectories] == ["edited/0"]


class CharPolicy(ScriptedPolicy):
    """Samples its text one character per token: a valid but non-canonical tokenization (a model double)."""

    async def generate(self, prompt_ids, params):
        text = self.responses(self.tokenizer.decode(list(prompt_ids)))
        ids = [self.tokenizer.convert_tokens_to_ids(self.tokenizer.tokenize(ch)[0]) for ch in text]
        ids.append(self.tokenizer.eos_token_id)
        return Completion(tuple(ids), (-0.5,) * len(ids), (1.0,) * len(ids), text, "stop")


def test_non_canonical_sampled_tokens_are_reported_but_trained_as_recorded(tiny_tokenizer):
    from openai import OpenAI

    recorder = SessionRecorder(tiny_tokenizer)
    policy = CharPolicy(tiny_tokenizer, lambda p: "I will think about that question")
    with serve_in_thread(create_app(ChatService(policy, ("m",), recorder=recorder))) as url:
        client = OpenAI(base_url=url + "/v1", api_key="s", default_headers={"X-Agentrl-Group": "task-7"})
        reply = client.chat.completions.create(model="m", messages=QUESTION).choices[0].message
        follow = QUESTION + [{"role": "assistant", "content": reply.content}, {"role": "user", "content": "And?"}]
        out = client.chat.completions.create(model="m", messages=follow)
    (episode,) = recorder.episodes("s")
    assert [m["kind"] for m in episode.mismatches] == ["retokenized"] and len(episode.turns) == 2
    assert episode.group == "task-7"
    recorded = episode.trajectory().token_ids
    assert (
        out.model_extra["agentrl"]["prompt_token_ids"]
        == recorded[: len(out.model_extra["agentrl"]["prompt_token_ids"])]
    )
    episode.reward = 1.0
    _, report = recorded_groups([episode])
    assert report["retokenized"] == ["s/0"] and report["trainable"] == 1


async def test_openai_agents_sdk_tool_task_through_the_gateway_trains_one_step(tmp_path):
    from agentrl.scaffolds.code import tasks
    from agentrl.scaffolds.code.tools import evaluate, format_number
    from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
    from openai import AsyncOpenAI

    from agentrl.config import TrainerConfig

    set_tracing_disabled(True)
    calls = []

    @function_tool
    def calculate(expression: str) -> str:
        """Evaluate an arithmetic expression.

        Args:
            expression: The expression, e.g. 12 * (3 + 4).
        """
        calls.append(expression)
        try:
            return format_number(evaluate(expression))
        except ValueError as e:
            return f"error: {e}"

    service = build_service("tiny", record_dir=tmp_path / "rec", device="cpu")
    task = tasks.tasks("train")[0]
    with serve_in_thread(create_app(service)) as url:
        for session, seed in (("agent-a", 1), ("agent-b", 2)):
            client = AsyncOpenAI(base_url=url + "/v1", api_key=session)
            agent = Agent(
                name="calc",
                instructions=tasks.SYSTEM_PROMPT,
                tools=[calculate],
                model=OpenAIChatCompletionsModel(model="tiny", openai_client=client),
                model_settings=ModelSettings(temperature=1.0, max_tokens=64, extra_args={"seed": seed}),
            )
            result = await Runner.run(agent, task.prompt, max_turns=4)
            assert isinstance(result.final_output, str)
            await client.close()
    assert calls, "the agent never called its tool through the gateway"
    recorder = service.recorder
    for session, reward in (("agent-a", 1.0), ("agent-b", 0.0)):
        recorder.set_reward(session, reward)
    episodes = load_recorded(tmp_path / "rec")
    assert {e["session_id"] for e in episodes} == {"agent-a", "agent-b"}
    assert not [m for e in episodes for m in e["mismatches"] if m["kind"] == "history"]
    assert any(t["tool_calls"] for e in episodes for t in e["trajectory"]["turns"])
    model = service.policy.model
    before = [p.detach().clone() for p in model.parameters()]
    stats = train_recorded_step(model, service.tokenizer, episodes, TrainerConfig(lr=1e-3))
    assert stats["report"]["trainable"] == 2 and stats["report"]["groups"] == 1
    assert stats["sequences"] == 2.0 and stats["tokens"] > 0
    # token-exact recording: the learner's logprobs of the recorded ids are the sampler's
    assert stats["sampler_logprob_abs_diff"] < 1e-3
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))

    # the same sessions from the command line, into a checkpoint that loads and serves again
    from typer.testing import CliRunner

    from agentrl.cli.app import app

    result = CliRunner().invoke(app, ["train-recorded", str(tmp_path / "rec"), "--output", str(tmp_path / "ckpt")])
    assert result.exit_code == 0, result.output
    assert "'trainable': 2" in result.output and "sampler_logprob_abs_diff" in result.output
    assert build_service(str(tmp_path / "ckpt"), device="cpu").model_names[0] == str(tmp_path / "ckpt")


def test_a_forced_tool_call_opening_is_recorded_as_prompt_not_as_sampled(tiny_tokenizer, tmp_path):
    from openai import OpenAI

    def reluctant(prompt: str) -> str:
        if prompt.endswith('"arguments":'):
            return '{"expression": "6 * 7"}}\n</tool_call>'
        return "42" if "<tool_response>" in prompt else "I know it."

    recorder = SessionRecorder(tiny_tokenizer)
    service = ChatService(ScriptedPolicy(tiny_tokenizer, reluctant), ("scripted",), recorder=recorder)
    named = {"type": "function", "function": {"name": "calculate"}}
    with serve_in_thread(create_app(service)) as url:
        client = OpenAI(base_url=url + "/v1", api_key="key-f")
        first = client.chat.completions.create(model="scripted", messages=QUESTION, tools=TOOLS, tool_choice=named)
        message = first.choices[0].message.model_dump(exclude_none=True)
        tool = {"role": "tool", "tool_call_id": message["tool_calls"][0]["id"], "content": "42"}
        client.chat.completions.create(model="scripted", messages=[*QUESTION, message, tool], tools=TOOLS)
    (episode,) = recorder.episodes("key-f")
    trajectory = episode.trajectory()
    forced = tiny_tokenizer.encode('<tool_call>\n{"name": "calculate", "arguments":', add_special_tokens=False)
    assert list(trajectory.prompt_ids[-len(forced) :]) == forced
    assert tiny_tokenizer.decode(trajectory.turns[0].completion_ids).startswith('{"expression": "6 * 7"}}')
    assert sum(trajectory.loss_mask) == sum(len(t.completion_ids) for t in trajectory.turns)
    assert len(trajectory.turns) == 2 and episode.trainable
