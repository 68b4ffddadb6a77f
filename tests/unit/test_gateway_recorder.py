"""The gateway's message handling and session recorder, without a server."""

import json

import pytest

from agentrl.rollout.chat import ChatFormat, ParsedTurn, template_mismatch
from agentrl.serve.messages import canonical, reply_message, template_messages
from agentrl.serve.recorder import SessionRecorder
from agentrl.serve.sampling import RequestError, sampling_params
from agentrl.types import Completion, ToolCall

pytestmark = pytest.mark.unit

SYSTEM_USER = [{"role": "system", "content": "s"}, {"role": "user", "content": "What is 2 + 2?"}]


def test_client_messages_become_template_messages():
    wire = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "calculate", "arguments": '{"expression": "2 + 2"}'}}
        ],
    }
    parts = {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    out = template_messages([wire, parts])
    assert out[0]["content"] == "" and out[0]["tool_calls"][0]["function"]["arguments"] == {"expression": "2 + 2"}
    assert out[1]["content"] == "ab"
    same = dict(out[0], tool_calls=[dict(out[0]["tool_calls"][0], id="other")])
    assert canonical(same) == canonical(out[0])


def test_reply_message_carries_json_string_arguments():
    parsed = ParsedTurn("", (ToolCall("c", "f", {"x": 1}),))
    message = reply_message(parsed, "raw", parse_tools=True)
    assert message["content"] is None and json.loads(message["tool_calls"][0]["function"]["arguments"]) == {"x": 1}
    assert reply_message(parsed, " raw ", parse_tools=False) == {"role": "assistant", "content": "raw"}


def test_sampling_params_validate_and_fit_the_context():
    params = sampling_params(
        {"max_tokens": 500, "temperature": 0, "seed": 3},
        prompt_tokens=900,
        context_tokens=1024,
        default_max_tokens=64,
        choice=2,
    )
    assert params.max_new_tokens == 124 and params.temperature == 0.0 and params.seed == 5
    with pytest.raises(RequestError, match="context window"):
        sampling_params({}, prompt_tokens=1024, context_tokens=1024, default_max_tokens=64)
    with pytest.raises(RequestError, match="temperature"):
        sampling_params({"temperature": 5}, prompt_tokens=1, context_tokens=1024, default_max_tokens=64)


def sampled(tokenizer, text: str) -> Completion:
    ids = tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return Completion(tuple(ids), (-0.1,) * len(ids), (0.5,) * len(ids), text, "stop")


def test_continuations_extend_the_recorded_ids_and_new_tasks_open_episodes(tiny_tokenizer):
    recorder = SessionRecorder(tiny_tokenizer)
    call = '<tool_call>\n{"name": "calculate", "arguments": {"expression": "2 + 2"}}\n</tool_call>'
    first = recorder.begin("s", SYSTEM_USER, None)
    reply = template_messages(
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c0",
                        "type": "function",
                        "function": {"name": "calculate", "arguments": '{"expression": "2 + 2"}'},
                    }
                ],
            }
        ]
    )
    recorder.finish(first, sampled(tiny_tokenizer, call), (), reply[0], temperature=1.0)
    history = SYSTEM_USER + reply + [{"role": "tool", "tool_call_id": "c0", "content": "4"}]
    second = recorder.begin("s", history, None)
    assert second.episode is first.episode and second.prompt_ids[: len(first.episode.context)] == first.episode.context
    recorder.finish(second, sampled(tiny_tokenizer, "4"), (), {"role": "assistant", "content": "4"}, temperature=1.0)
    trajectory = first.episode.trajectory()
    assert template_mismatch(ChatFormat(tiny_tokenizer), trajectory) is None and not first.episode.mismatches
    assert trajectory.answer == "4"
    other = recorder.begin("s", [SYSTEM_USER[0], {"role": "user", "content": "What is 3 + 3?"}], None)
    again = recorder.begin("s", SYSTEM_USER, None)
    assert other.episode is not first.episode and other.episode.group != first.episode.group
    assert again.episode.group == first.episode.group and not again.episode.mismatches
    assert [e.episode_id for e in recorder.episodes("s")] == ["s/0", "s/1", "s/2"]


def test_rewards_attach_to_the_latest_episode_or_a_turn(tiny_tokenizer):
    recorder = SessionRecorder(tiny_tokenizer)
    pending = recorder.begin("s", SYSTEM_USER, None)
    recorder.finish(pending, sampled(tiny_tokenizer, "4"), (), {"role": "assistant", "content": "4"}, temperature=1.0)
    assert recorder.set_reward("s", 1.0).reward == 1.0
    assert recorder.set_reward("s", 0.5, turn=0).turns[0].reward == 0.5
    with pytest.raises(KeyError):
        recorder.set_reward("missing", 1.0)
