"""Episodes with the chat templates and tool-call formats of real model families (Qwen2.5, Qwen3 thinking on and off,
Qwen3-Coder XML calls, Llama 3.1/3.2, Mistral), through the react scaffold and a real tool server: calls parse,
reasoning is kept apart from the answer, malformed calls are the policy's mistakes, and the trajectory's ids are
the sampled ids plus the template's rendering of each observation."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from agentrl.scaffolds.code.tools import calculate
from agentrl.scaffolds.react import ReactScaffold
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentrl.config import RolloutConfig
from agentrl.reward import RewardStack
from agentrl.rollout.chat import ChatFormat, ChatSettings, end_of_turn_ids, template_mismatch
from agentrl.testing import ScriptedPolicy
from agentrl.testing.families import FAMILIES, family_model
from agentrl.toolserver.app import create_app
from agentrl.toolserver.client import ToolClient
from agentrl.types import StopReason, Task

pytestmark = pytest.mark.integration

TASK = Task(id="mul", prompt="What is 12*3? Use the calculator.", answer="36")
THINKING = {"qwen3", "qwen3_coder"}


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family(request):
    model, tokenizer = family_model(request.param)
    return request.param, tokenizer, end_of_turn_ids(tokenizer, model.generation_config.eos_token_id)


def write_call(format_name: str, name: str, arguments: dict) -> str:
    """One call as the family's model writes it."""
    if format_name == "hermes":
        return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"
    if format_name == "qwen3_coder":
        params = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in arguments.items())
        return f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"
    if format_name == "llama3_json":
        return json.dumps({"name": name, "parameters": arguments})
    if format_name == "pythonic":
        listed = ", ".join(f"{k}={v!r}" for k, v in arguments.items())
        return f"<|tool_call_start|>[{name}({listed})]<|tool_call_end|>"
    return "[TOOL_CALLS] " + json.dumps([{"name": name, "arguments": arguments}])


def thought(family_name: str, thinking: str, rest: str) -> str:
    """A turn with reasoning, as the family writes it (Qwen3.5-style prompts open the block themselves)."""
    if family_name == "qwen3_coder":
        return f"{thinking}\n</think>\n\n{rest}"
    if family_name == "qwen3":
        return f"<think>\n{thinking}\n</think>\n\n{rest}"
    if family_name == "mistral" and not rest.startswith("["):
        return " " + rest  # Mistral's answers start with a space, which its template writes after [/INST]
    return rest


async def play(family, responses, **settings):
    name, tokenizer, eos = family
    policy = ScriptedPolicy(tokenizer, responses)
    policy.chat_settings = ChatSettings(eos_token_ids=eos, **settings)
    scaffold = ReactScaffold(tools=[calculate], rollout=RolloutConfig(max_turns=4, max_new_tokens_per_turn=200))
    async with ToolClient(app=create_app([calculate])) as tools:
        trajectory = await scaffold.run(TASK, policy, tools, group_id="g", trajectory_id="g/0")
        chat = ChatFormat.of(policy, await tools.schemas(["calculate"]))
    return trajectory, chat


def rendered_without_call_ids(chat: ChatFormat, trajectory) -> tuple[str, str]:
    """(the full re-rendering, the trajectory) as text, Mistral's template-written call ids taken out."""
    full = chat.render(trajectory.messages, add_generation_prompt=False)
    full = re.sub(r', "id": "[A-Za-z0-9]{9}"', "", full)
    return full, chat.tokenizer.decode(trajectory.token_ids)


async def test_a_tool_call_then_an_answer_is_parsed_scored_and_token_exact(family):
    name = family[0]
    fmt = ChatFormat(family[1]).tool_format.name
    responses = [
        thought(name, "I should use the calculator.", write_call(fmt, "calculate", {"expression": "12*3"})),
        thought(name, "The tool said 36.", "36"),
    ]
    t, chat = await play(family, responses)
    assert t.stop_reason is StopReason.ANSWERED and t.answer == "36", (t.stop_reason, t.error, t.turns[0].parse_error)
    assert [c.name for c in t.turns[0].tool_calls] == ["calculate"]
    assert t.turns[0].tool_results[0].text == "36" and not t.turns[0].tool_results[0].is_error
    if name in THINKING:
        assert (
            t.turns[1].reasoning == "The tool said 36." and t.messages[-1]["reasoning_content"] == "The tool said 36."
        )
    scored = await RewardStack.from_specs(["exact_match"]).score(TASK, t)
    assert scored.reward == 1.0  # the reasoning is not part of the answer
    if name == "mistral":  # its template writes call ids the model never wrote
        full, got = rendered_without_call_ids(chat, t)
        assert full.startswith(got)
    else:
        assert template_mismatch(chat, t) is None


async def test_a_call_inside_the_reasoning_is_not_run(family):
    name = family[0]
    if name not in THINKING:
        pytest.skip("no reasoning block in this family's template")
    fmt = ChatFormat(family[1]).tool_format.name
    considered = write_call(fmt, "calculate", {"expression": "1+1"})
    t, _ = await play(family, [thought(name, f"Maybe {considered}? No.", "36")])
    assert t.stop_reason is StopReason.ANSWERED and t.answer == "36" and t.num_tool_calls == 0


async def test_a_malformed_call_is_a_mistake_the_policy_hears_about(family):
    """After a malformed call the correction note is a user message: Qwen3's template then drops the earlier
    reasoning when it re-renders the history (not prefix-preserving); the episode goes on token-exactly."""
    name = family[0]
    fmt = ChatFormat(family[1]).tool_format.name
    broken = {
        "hermes": '<tool_call>\n{"name": "calculate", "arguments": {"expression": NaN}}\n</tool_call>',
        "qwen3_coder": "<tool_call>\n<function=calculate>\n<parameter=expression>\n12*3\n</function>\n</tool_call>",
        "llama3_json": '{"name": "calculate", "parameters": {"expression": "12*3"}',
        "mistral": '[TOOL_CALLS] [{"name": "calculate", "arguments": {"expression": "12*3"}',
        "pythonic": "<|tool_call_start|>[calculate(expression=12*3)]<|tool_call_end|>",
    }[fmt]
    responses = [
        thought(name, "First try.", broken),
        thought(name, "Again.", write_call(fmt, "calculate", {"expression": "12*3"})),
        thought(name, "Done.", "36"),
    ]
    t, chat = await play(family, responses, template_kwargs={"enable_thinking": True} if name == "qwen3" else {})
    assert t.stop_reason is StopReason.ANSWERED and t.answer == "36", (t.stop_reason, t.error)
    assert t.turns[0].parse_error and not t.turns[0].tool_calls
    assert chat.tool_format.example.split("\n")[0] in chat.tokenizer.decode(list(t.turns[0].observation_ids))
    assert t.turns[1].tool_results[0].text == "36"
    ids, offset = t.token_ids, len(t.prompt_ids)
    for turn in t.turns:  # every sampled id is where the sampler put it
        assert ids[offset : offset + len(turn.completion_ids)] == list(turn.completion_ids)
        offset += len(turn.completion_ids) + len(turn.observation_ids)


async def test_thinking_off_closes_the_block_in_the_prompt(family):
    name, tokenizer, _ = family
    if name != "qwen3":
        pytest.skip("enable_thinking is Qwen3's switch")
    t, chat = await play(family, ["36"], template_kwargs={"enable_thinking": False})
    assert tokenizer.decode(list(t.prompt_ids)).endswith("<think>\n\n</think>\n\n")
    assert t.answer == "36" and template_mismatch(chat, t) is None


def test_every_end_of_turn_id_of_the_generation_config_ends_a_turn(family):
    name, tokenizer, eos = family
    expected = {tokenizer.convert_tokens_to_ids(t) for t in FAMILIES[name].generation_eos}
    assert expected <= set(eos) and set(
        ChatFormat(tokenizer, settings=ChatSettings(eos_token_ids=eos)).eos_token_ids
    ) == set(eos)


MARKUP = [
    "<tool_call>", "</tool_call>", "<function=calculate>", "<parameter=expression>", "</parameter>", "</function>",
    "<think>", "</think>", "[TOOL_CALLS]", "[ARGS]", '{"name": "calculate", "arguments": ', '"parameters": ',
    '{"expression": "1+1"}', "NaN", "\\ud800", "[" * 50, "<|im_end|>", "<|eot_id|>", "</s>", "[INST]", "\n", " ",
]  # fmt: skip
turn_text = st.lists(st.one_of(st.sampled_from(MARKUP), st.text(max_size=12)), max_size=12).map("".join)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(turn_text, min_size=1, max_size=3))
def test_no_model_output_is_an_infrastructure_failure(family, turns):
    t, _ = asyncio.run(play(family, turns))
    assert t.stop_reason is not StopReason.INFRA_ERROR, t.error
    ids, offset = t.token_ids, len(t.prompt_ids)
    for turn in t.turns:
        assert ids[offset : offset + len(turn.completion_ids)] == list(turn.completion_ids)
        offset += len(turn.completion_ids) + len(turn.observation_ids)
