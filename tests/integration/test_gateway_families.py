"""The recording gateway and `train-recorded` with the chat formats of real model families: an OpenAI-SDK agent's
session (tool call, tool result, answer) is parsed in the family's format, its reasoning returned apart, recorded
token-exactly even when the client drops the reasoning and the template rewrites its history, and trained on with
a randomly initialised model of the family's architecture."""

from __future__ import annotations

import json

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai import OpenAI

from agentrl.config import PolicyConfig, TrainerConfig
from agentrl.policy.backends import chat_settings
from agentrl.policy.loading import load_tokenizer
from agentrl.rollout.chat import ChatFormat
from agentrl.serve.app import create_app
from agentrl.serve.chat_completions import ChatService
from agentrl.serve.recorded import train_recorded
from agentrl.serve.recorder import SessionRecorder
from agentrl.testing import ScriptedPolicy, serve_in_thread
from agentrl.testing.families import save_family_model

pytestmark = pytest.mark.integration

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
CALLS = {
    "hermes": '<tool_call>\n{"name": "calculate", "arguments": {"expression": "6 * 7"}}\n</tool_call>',
    "qwen3_coder": "<tool_call>\n<function=calculate>\n<parameter=expression>\n6 * 7\n</parameter>\n</function>\n"
    "</tool_call>",
    "llama3_json": '{"name": "calculate", "parameters": {"expression": "6 * 7"}}',
    "mistral": '[TOOL_CALLS] [{"name": "calculate", "arguments": {"expression": "6 * 7"}}]',
}


def turns_of(chat: ChatFormat) -> list[str]:
    """The model's two turns in its own format, with reasoning where the family writes it."""
    call, answer = CALLS[chat.tool_format.name], " 42" if chat.tool_format.name == "mistral" else "42"
    if chat.reasoning is None:
        return [call, answer]
    think = lambda text: f"{text}\n</think>\n\n" if chat.prompt_opens_reasoning else f"<think>\n{text}\n</think>\n\n"  # noqa: E731
    return [think("Use the calculator.") + call, think("It said 42.") + answer]


@pytest.mark.parametrize("family", ["qwen3", "qwen3_coder", "llama3", "mistral"])
def test_a_gateway_session_is_recorded_token_exactly_and_trains(family, tmp_path):
    path = save_family_model(family, tmp_path / family)
    tokenizer = load_tokenizer(str(path))
    settings = chat_settings(PolicyConfig(model=str(path)), tokenizer)
    chat = ChatFormat(tokenizer, TOOLS, settings)
    policy = ScriptedPolicy(tokenizer, turns_of(chat))
    policy.chat_settings = settings
    recorder = SessionRecorder(tokenizer, tmp_path / "sessions", settings=settings)
    with serve_in_thread(create_app(ChatService(policy, ("m",), recorder=recorder))) as url:
        for key, reward in (("agent-a", 1.0), ("agent-b", 0.0)):
            client = OpenAI(base_url=url + "/v1", api_key=key)
            first = client.chat.completions.create(model="m", messages=QUESTION, tools=TOOLS)
            message = first.choices[0].message
            assert [c.function.name for c in message.tool_calls] == ["calculate"], message
            assert json.loads(message.tool_calls[0].function.arguments) == {"expression": "6 * 7"}
            if chat.reasoning is not None:
                assert message.model_extra["reasoning_content"] == "Use the calculator."
            # an ordinary agent sends back the call without the reasoning
            sent = {
                "role": "assistant",
                "content": message.content,
                "tool_calls": [c.model_dump() for c in message.tool_calls],
            }
            result = {"role": "tool", "tool_call_id": message.tool_calls[0].id, "content": "42"}
            second = client.chat.completions.create(model="m", messages=[*QUESTION, sent, result], tools=TOOLS)
            assert second.choices[0].message.content == "42"
            episode = recorder.episodes(key)[0]
            trajectory = episode.trajectory()
            assert len(trajectory.turns) == 2 and episode.trainable and not episode.mismatches, episode.mismatches
            # the second prompt is exactly the recorded ids so far: what the model saw is what the learner scores
            prompt = second.model_extra["agentrl"]["prompt_token_ids"]
            assert prompt == trajectory.token_ids[: -len(trajectory.turns[1].completion_ids)]
            assert httpx.post(f"{url}/v1/sessions/{key}/reward", json={"reward": reward}).status_code == 200
    history = train_recorded(tmp_path / "sessions", model=str(path), steps=1, config=TrainerConfig(lr=1e-6))
    assert history[0]["report"]["trainable"] == 2 and "loss" in history[0]


MARKUP = [
    "<tool_call>", "</tool_call>", "<function=calculate>", "<parameter=expression>", "</parameter>", "</function>",
    "<think>", "</think>", "[TOOL_CALLS]", "[ARGS]", '{"name": "calculate", "arguments": ', '"parameters": ',
    '{"expression": NaN}', "\\ud800", "[" * 40, "<|im_end|>", "<|eot_id|>", "</s>", "\n", " ",
]  # fmt: skip
NEXT_TURN: list[str] = [""]


@pytest.fixture(scope="module", params=["qwen3", "llama3", "mistral"])
def fuzzed_gateway(request, tmp_path_factory):
    path = save_family_model(request.param, tmp_path_factory.mktemp(request.param))
    tokenizer = load_tokenizer(str(path))
    policy = ScriptedPolicy(tokenizer, lambda prompt: NEXT_TURN[0])
    policy.chat_settings = chat_settings(PolicyConfig(model=str(path)), tokenizer)
    recorder = SessionRecorder(tokenizer, settings=policy.chat_settings)
    with serve_in_thread(create_app(ChatService(policy, ("m",), recorder=recorder))) as url:
        yield url


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(st.sampled_from(MARKUP), st.text(max_size=10)), max_size=10).map("".join), st.booleans())
def test_no_model_output_makes_the_gateway_fail(fuzzed_gateway, text, recorded):
    NEXT_TURN[0] = text
    headers = {"X-Session-Id": "fuzz"} if recorded else {}
    body = {"model": "m", "messages": QUESTION, "tools": TOOLS}
    response = httpx.post(f"{fuzzed_gateway}/v1/chat/completions", json=body, headers=headers, timeout=30)
    assert response.status_code == 200, response.text
    for call in response.json()["choices"][0]["message"].get("tool_calls") or ():
        assert isinstance(json.loads(call["function"]["arguments"]), dict)  # what a client will do with it
