"""Episodes of the react scaffold against a real tool server on 127.0.0.1, with a scripted policy."""

import asyncio
import json

import pytest
from agentrl.scaffolds.react import ReactScaffold

from agentrl.config import RolloutConfig
from agentrl.rollout.chat import ChatFormat, template_mismatch
from agentrl.testing import ECHO_STAMP, ScriptedPolicy, echo, serve_in_thread
from agentrl.toolserver.app import create_app
from agentrl.toolserver.client import ToolClient
from agentrl.types import StopReason, Task

pytestmark = pytest.mark.integration

TASK = Task(id="t/0", prompt="Echo the word ping, then say done.", answer="done")


def call(name, **arguments):
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


@pytest.fixture(scope="module")
def server_url():
    with serve_in_thread(create_app([echo])) as url:
        yield url


async def run_episode(url, tokenizer, responses, **rollout):
    scaffold = ReactScaffold(tools=[echo], rollout=RolloutConfig(**rollout))
    policy = ScriptedPolicy(tokenizer, responses)
    async with ToolClient(url) as tools:
        trajectory = await scaffold.run(TASK, policy, tools, group_id="g", trajectory_id="g/0")
        schemas = await tools.schemas(["echo"])
    return trajectory, ChatFormat(tokenizer, schemas)


async def test_stamped_echo_episode_is_token_exact(server_url, tiny_tokenizer):
    t, renderer = await run_episode(server_url, tiny_tokenizer, [call("echo", text="ping"), "done"])
    assert t.stop_reason is StopReason.ANSWERED and t.answer == "done"
    result = t.turns[0].tool_results[0]
    assert not result.is_error and ECHO_STAMP in result.text  # the real tool path ran
    assert ECHO_STAMP in tiny_tokenizer.decode(list(t.turns[0].observation_ids))
    assert template_mismatch(renderer, t) is None
    mask = t.loss_mask
    assert not any(mask[: len(t.prompt_ids)])
    offset = len(t.prompt_ids)
    turn = t.turns[0]
    assert all(mask[offset : offset + len(turn.completion_ids)])
    assert not any(
        mask[offset + len(turn.completion_ids) : offset + len(turn.completion_ids) + len(turn.observation_ids)]
    )
    assert len(t.token_ids) == len(mask) == len(t.sampler_logprobs) == len(t.turn_index)


async def test_parallel_tool_calls_in_one_turn(server_url, tiny_tokenizer):
    both = call("echo", text="a") + "\n" + call("echo", text="b")
    t, renderer = await run_episode(server_url, tiny_tokenizer, [both, "done"])
    results = t.turns[0].tool_results
    assert [r.text.endswith(x) for r, x in zip(results, "ab", strict=False)] == [True, True]
    assert template_mismatch(renderer, t) is None


async def test_malformed_calls_end_the_episode_with_a_stop_reason(server_url, tiny_tokenizer):
    t, renderer = await run_episode(
        server_url, tiny_tokenizer, ['<tool_call>{"name": "echo", "arguments": {'], max_parse_errors=2
    )
    assert t.stop_reason is StopReason.PARSE_ERRORS
    assert len(t.turns) == 2 and all(turn.parse_error for turn in t.turns)
    notes = [m["content"] for m in t.messages if m["role"] == "user"][1:]
    assert notes and "unclosed" in notes[0]  # the model was told what was wrong
    assert template_mismatch(renderer, t) is None


async def test_recovers_after_a_malformed_turn(server_url, tiny_tokenizer):
    t, _ = await run_episode(
        server_url, tiny_tokenizer, ["<tool_call>oops</tool_call>", call("echo", text="x"), "done"]
    )
    assert t.stop_reason is StopReason.ANSWERED and t.turns[0].parse_error and not t.turns[1].parse_error


async def test_tool_errors_are_observations(server_url, tiny_tokenizer):
    t, _ = await run_episode(server_url, tiny_tokenizer, [call("nope"), call("echo", wrong=1), "done"])
    assert t.stop_reason is StopReason.ANSWERED
    assert t.turns[0].tool_results[0].error_type == "not_found"
    assert t.turns[1].tool_results[0].error_type == "bad_arguments"


async def test_turn_and_token_limits(server_url, tiny_tokenizer):
    t, _ = await run_episode(server_url, tiny_tokenizer, [call("echo", text="again")], max_turns=3)
    assert t.stop_reason is StopReason.MAX_TURNS and len(t.turns) == 3
    assert t.turns[-1].observation_ids == ()  # nothing is fed back after the last turn
    t, _ = await run_episode(server_url, tiny_tokenizer, ["word " * 50], max_new_tokens_per_turn=8)
    assert t.stop_reason is StopReason.MAX_TOKENS and len(t.turns[0].completion_ids) == 8


async def test_unreachable_tool_server_is_an_infra_error(tiny_tokenizer):
    scaffold = ReactScaffold(tools=[echo])
    policy = ScriptedPolicy(tiny_tokenizer, [call("echo", text="x"), "done"])
    with serve_in_thread(create_app([echo])) as url:
        async with ToolClient(url) as tools:
            ok = await scaffold.run(TASK, policy, tools, group_id="g", trajectory_id="g/0")
    assert ok.stop_reason is StopReason.ANSWERED
    # the server is gone now: the same scaffold's next episode cannot open a session
    async with ToolClient(url, retries=1) as tools:
        t = await asyncio.wait_for(scaffold.run(TASK, policy, tools, group_id="g", trajectory_id="g/1"), 60)
    assert t.stop_reason is StopReason.INFRA_ERROR and t.error
