"""`agentrl serve` streaming token by token, `top_logprobs`, and `tool_choice` enforced, through the openai SDK on
127.0.0.1 over the shipped tiny policy and random models of real families (doubles for the model only)."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai import OpenAI

from agentrl.config import PolicyConfig
from agentrl.policy.backends import chat_settings
from agentrl.policy.loading import load_tokenizer
from agentrl.rollout.chat import ChatFormat
from agentrl.serve.app import build_service, create_app
from agentrl.serve.detokenizer import IncrementalDetokenizer
from agentrl.serve.forbidden_text import ForbiddenText
from agentrl.serve.messages import reply_message
from agentrl.serve.turn_stream import TurnStream
from agentrl.testing import serve_in_thread
from agentrl.testing.families import save_family_model

pytestmark = pytest.mark.integration


def tool(name: str, argument: str) -> dict:
    schema = {"type": "object", "properties": {argument: {"type": "string"}}, "required": [argument]}
    return {"type": "function", "function": {"name": name, "description": f"{name}.", "parameters": schema}}


TOOLS = [tool("calculate", "expression")]
TWO_TOOLS = [*TOOLS, tool("lookup", "query")]
CHATTY = ["Hello! Who are you?", "Write a short poem about the sea."]


def task_messages(k: int) -> list[dict]:
    from agentrl.scaffolds.code import tasks

    task = tasks.tasks("test")[k]
    return [{"role": "system", "content": tasks.SYSTEM_PROMPT}, {"role": "user", "content": task.prompt}]


def same_up_to_rounding(a, b) -> bool:
    """Equal, with floats (log-probs) equal to 1e-5: a repeated prompt reuses the keys and values parked by the
    first request, computed in another batch, so its log-probs may differ in the last bits."""
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= 1e-5
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_up_to_rounding(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_up_to_rounding(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def streamed(client: OpenAI, **request) -> dict:
    """A streamed reply joined as a client joins it, with what the joining saw."""
    out = {"content": [], "reasoning": "", "calls": {}, "logprobs": [], "finish": None, "usage": None, "extra": None}
    out |= {"call_deltas": [], "content_logprobs": []}
    for chunk in client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **request):
        if chunk.usage is not None:
            out["usage"], out["extra"] = chunk.usage, chunk.model_extra.get("agentrl")
        for choice in chunk.choices:
            delta = choice.delta
            logprobs = [t.model_dump() for t in (choice.logprobs.content or ())] if choice.logprobs else []
            if delta.content:
                out["content"].append(delta.content)
                out["content_logprobs"].append(len(logprobs))
            out["reasoning"] += (delta.model_extra or {}).get("reasoning_content") or ""
            for call in delta.tool_calls or ():
                entry = out["calls"].setdefault(call.index, {"id": call.id, "name": "", "arguments": ""})
                assert call.id in (None, entry["id"])  # the id comes once, with the name
                entry["name"] += call.function.name or ""
                entry["arguments"] += call.function.arguments or ""
                out["call_deltas"].append(call.model_dump(exclude_none=True))
            out["logprobs"] += logprobs
            out["finish"] = choice.finish_reason or out["finish"]
    return out


def assert_openai_call_deltas(deltas: list[dict]) -> None:
    """OpenAI's streaming shape: per call, one delta with its index, id, type and name, then argument fragments."""
    for index in sorted({d["index"] for d in deltas}):
        first, *rest = [d for d in deltas if d["index"] == index]
        assert first["id"].startswith("call_") and first["type"] == "function" and first["function"]["name"]
        assert rest and all(set(d) == {"index", "function"} and set(d["function"]) == {"arguments"} for d in rest)


def calls_of(message) -> dict:
    return {
        k: {"name": c.function.name, "arguments": c.function.arguments} for k, c in enumerate(message.tool_calls or ())
    }


def joined_calls(out: dict) -> dict:
    return {k: {"name": c["name"], "arguments": c["arguments"]} for k, c in out["calls"].items()}


@pytest.fixture(scope="module")
def tiny_url():
    with serve_in_thread(create_app(build_service("tiny", device="cpu"))) as url:
        yield url


@pytest.fixture(scope="module")
def client(tiny_url):
    return OpenAI(base_url=tiny_url + "/v1", api_key="k", max_retries=0)


def test_content_streams_token_by_token_and_joins_to_the_non_streamed_turn(client):
    for text in CHATTY:
        request = {"model": "tiny", "messages": [{"role": "user", "content": text}], "max_tokens": 48, "logprobs": True}
        for sampling in ({"temperature": 0}, {"temperature": 1.0, "seed": 3}):
            whole = client.chat.completions.create(**request, **sampling)
            out = streamed(client, **request, **sampling)
            assert len(out["content"]) > 1, out["content"]  # token by token, not the finished turn in one piece
            # each piece of text comes with the tokens that wrote it, not cut from the finished turn afterwards
            assert all(out["content_logprobs"]) and sum(out["content_logprobs"]) <= len(out["logprobs"])
            assert "".join(out["content"]) == whole.choices[0].message.content
            assert out["finish"] == whole.choices[0].finish_reason
            assert out["extra"]["token_ids"] == whole.model_extra["agentrl"]["token_ids"]
            assert out["usage"].completion_tokens == whole.usage.completion_tokens


def test_several_choices_stream_interleaved_by_index(client):
    request = {"model": "tiny", "messages": [{"role": "user", "content": CHATTY[1]}], "max_tokens": 32, "n": 3}
    whole = client.chat.completions.create(**request, temperature=1.0, seed=5)
    texts: dict[int, str] = {}
    for chunk in client.chat.completions.create(**request, temperature=1.0, seed=5, stream=True):
        for choice in chunk.choices:
            texts[choice.index] = texts.get(choice.index, "") + (choice.delta.content or "")
    assert texts == {c.index: c.message.content for c in whole.choices} and len(set(texts.values())) > 1


def test_tool_call_deltas_reassemble_into_the_non_streamed_call(client):
    for k in range(3):
        request = {"model": "tiny", "messages": task_messages(k), "tools": TOOLS, "temperature": 0, "max_tokens": 64}
        whole = client.chat.completions.create(**request).choices[0]
        out = streamed(client, **request)
        assert whole.finish_reason == out["finish"] == "tool_calls"
        assert joined_calls(out) == calls_of(whole.message) and len(out["calls"]) == 1
        assert_openai_call_deltas(out["call_deltas"])
        assert not out["content"]  # the call's markup never leaks as content


def test_tool_choice_required_calls_a_tool_on_every_turn(client):
    """The tiny policy answers after a tool result; `required` still gets a call, to the tool it finds likeliest."""
    answered = 0
    for k in range(3):
        messages = task_messages(k)
        for turn in range(3):
            request = {"model": "tiny", "messages": messages, "tools": TWO_TOOLS, "tool_choice": "required"}
            request |= {"temperature": 0, "max_tokens": 64}
            if turn == 1:  # where the model, left to itself, answers
                auto = client.chat.completions.create(**{**request, "tool_choice": "auto"}).choices[0]
                answered += not auto.message.tool_calls
            if turn % 2:
                out = streamed(client, **request)
                assert out["finish"] == "tool_calls" and len(out["calls"]) == 1 and not out["content"], out
                assert_openai_call_deltas(out["call_deltas"])
                call = {"id": out["calls"][0]["id"], "type": "function", "function": joined_calls(out)[0]}
                message = {"role": "assistant", "content": None, "tool_calls": [call]}
            else:
                reply = client.chat.completions.create(**request).choices[0]
                assert reply.finish_reason == "tool_calls" and reply.message.tool_calls, reply.message
                message = reply.message.model_dump(exclude_none=True)
            assert message["tool_calls"][0]["function"]["name"] == "calculate"  # the arithmetic tool it learned
            result = {"role": "tool", "tool_call_id": message["tool_calls"][0]["id"], "content": "42"}
            messages = [*messages, message, result]
    assert answered == 3  # so each of those calls was the forcing's doing


def test_a_named_tool_choice_calls_that_tool(client):
    for name in ("calculate", "lookup"):
        named = {"type": "function", "function": {"name": name}}
        request = {"model": "tiny", "messages": task_messages(0), "tools": TWO_TOOLS, "tool_choice": named}
        reply = client.chat.completions.create(**request, temperature=0, max_tokens=64).choices[0]
        assert [c.function.name for c in reply.message.tool_calls] == [name]
        assert isinstance(json.loads(reply.message.tool_calls[0].function.arguments), dict)
        out = streamed(client, **request, temperature=0, max_tokens=64)
        assert joined_calls(out) == calls_of(reply.message)
        assert_openai_call_deltas(out["call_deltas"])


def test_tool_choice_none_keeps_the_model_from_calling(client):
    request = {"model": "tiny", "messages": task_messages(0), "tools": TOOLS, "max_tokens": 64}
    assert client.chat.completions.create(**request, temperature=0).choices[0].message.tool_calls  # it would call
    for seed in range(4):
        reply = client.chat.completions.create(**request, tool_choice="none", temperature=1.0, seed=seed).choices[0]
        assert reply.message.tool_calls is None and reply.finish_reason != "tool_calls"
        assert "<tool_call>" not in reply.message.content and reply.message.content


@pytest.mark.parametrize("context", ["", "Hi <", "Hi <tool", "<tool_call", "x</tool_call"])
def test_forbidden_text_bans_exactly_the_tokens_that_would_complete_it(tiny_tokenizer, context):
    forbid = ForbiddenText(tiny_tokenizer, ["<tool_call>"])
    ids = tiny_tokenizer.encode(context, add_special_tokens=False)
    banned = forbid(ids)
    before = tiny_tokenizer.decode(ids).count("<tool_call>")
    completing = {
        t for t in range(len(tiny_tokenizer)) if tiny_tokenizer.decode([*ids, t]).count("<tool_call>") > before
    }
    assert banned == completing and completing


def test_top_logprobs_are_the_k_most_likely_tokens_of_the_sampling_distribution(client):
    request = {"model": "tiny", "messages": task_messages(1), "tools": TOOLS, "max_tokens": 48}
    request |= {"temperature": 0.8, "seed": 4, "logprobs": True, "top_logprobs": 5}
    whole = client.chat.completions.create(**request).choices[0]
    entries = [t.model_dump() for t in whole.logprobs.content]
    found = 0
    for entry in entries:
        top = entry["top_logprobs"]
        assert len(top) == 5 and [t["logprob"] for t in top] == sorted((t["logprob"] for t in top), reverse=True)
        assert top[0]["logprob"] >= entry["logprob"] and sum(2.718281828 ** t["logprob"] for t in top) <= 1 + 1e-4
        same = [t for t in top if t["token"] == entry["token"]]
        found += bool(same)
        assert all(t["logprob"] == pytest.approx(entry["logprob"], abs=1e-5) for t in same)
    assert found == len(entries)  # at T = 0.8 the tiny policy samples among its top 5
    assert same_up_to_rounding(streamed(client, **request)["logprobs"], entries)  # the same entries, chunk by chunk

    plain = client.chat.completions.create(**{**request, "top_logprobs": 0}).choices[0]
    assert [t.top_logprobs for t in plain.logprobs.content] == [[]] * len(entries)
    assert same_up_to_rounding([t.logprob for t in plain.logprobs.content], [t["logprob"] for t in entries])
    import openai

    for bad in ({"top_logprobs": 21}, {"top_logprobs": 2, "logprobs": False}):
        with pytest.raises(openai.BadRequestError, match="top_logprobs"):
            client.chat.completions.create(**{**request, **bad})


def test_the_recorded_episode_is_the_same_streamed_or_not(tmp_path):
    service = build_service("tiny", record=True, device="cpu")
    named = {"type": "function", "function": {"name": "calculate"}}
    with serve_in_thread(create_app(service)) as url:
        for session, stream in (("plain", False), ("streamed", True)):
            client = OpenAI(base_url=url + "/v1", api_key=session)
            messages = task_messages(2)
            for turn, choice in enumerate((named, "auto")):
                request = {"model": "tiny", "messages": messages, "tools": TOOLS, "tool_choice": choice}
                request |= {"temperature": 1.5, "seed": 7 + turn, "max_tokens": 64}
                if stream:
                    out = streamed(client, **request)
                    calls = [
                        {"id": c["id"], "type": "function", "function": joined_calls(out)[k]}
                        for k, c in out["calls"].items()
                    ]
                    message = {"role": "assistant", "content": "".join(out["content"]) or None}
                    message |= {"tool_calls": calls} if calls else {}
                else:
                    message = client.chat.completions.create(**request).choices[0].message.model_dump(exclude_none=True)
                if not message.get("tool_calls"):
                    break
                result = {"role": "tool", "tool_call_id": message["tool_calls"][0]["id"], "content": "42"}
                messages = [*messages, message, result]
    (plain,), (streamed_,) = service.recorder.episodes("plain"), service.recorder.episodes("streamed")
    a, b = plain.trajectory(), streamed_.trajectory()
    assert len(a.turns) == len(b.turns) == 2 and not plain.mismatches and not streamed_.mismatches
    assert a.token_ids == b.token_ids and a.loss_mask == b.loss_mask
    assert same_up_to_rounding(list(a.sampler_logprobs), list(b.sampler_logprobs))
    forced = ChatFormat(service.tokenizer, TOOLS).encode('<tool_call>\n{"name": "calculate", "arguments":')
    assert list(a.prompt_ids[-len(forced) :]) == forced  # the forced opening: prompt, outside the loss mask


def test_a_client_that_leaves_mid_stream_frees_the_sampler(tmp_path):
    """A random model writes on for a thousand tokens or so unless the server notices that nobody reads them."""
    path = save_family_model("qwen3", tmp_path / "qwen3")
    service = build_service(str(path), device="cpu")
    body = {"model": str(path), "messages": [{"role": "user", "content": "Go on."}], "stream": True}
    body |= {"max_tokens": 1500, "temperature": 1.0, "seed": 1}
    with serve_in_thread(create_app(service)) as url:
        with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=30) as response:
            lines = response.iter_lines()
            assert [next(lines) for _ in range(4)]
        stats, seen = service.policy.stats, -1
        while stats.batches != seen:  # until the decoding loop stops stepping
            seen = stats.batches
            time.sleep(0.5)
        # the row left the loop unfinished (a finished row counts its tokens) long before its end, the gate is free
        assert service.gate.in_flight == 0 and stats.tokens == 0 and stats.batches < 500, stats


@pytest.mark.parametrize("family", ["qwen3", "qwen3_coder", "llama3", "mistral"])
def test_random_models_of_real_families_stream_the_non_streamed_message(family, tmp_path):
    path = save_family_model(family, tmp_path / family)
    service = build_service(str(path), device="cpu")
    prompts = {}
    with serve_in_thread(create_app(service)) as url:
        client = OpenAI(base_url=url + "/v1", api_key="k", max_retries=0)
        for seed, choice in enumerate(("auto", "required", "none")):
            request = {"model": str(path), "messages": task_messages(0), "tools": TOOLS, "tool_choice": choice}
            request |= {"temperature": 1.0, "seed": seed, "max_tokens": 40, "logprobs": True, "top_logprobs": 2}
            whole = client.chat.completions.create(**request)
            out = streamed(client, **request)
            message = whole.choices[0].message
            assert "".join(out["content"]) == (message.content or "")
            assert out["reasoning"] == ((message.model_extra or {}).get("reasoning_content") or "")
            assert joined_calls(out) == calls_of(message) and out["finish"] == whole.choices[0].finish_reason
            assert out["extra"]["token_ids"] == whole.model_extra["agentrl"]["token_ids"]
            assert same_up_to_rounding(out["logprobs"], [t.model_dump() for t in whole.choices[0].logprobs.content])
            prompts[choice] = whole.model_extra["agentrl"]["prompt_token_ids"]
    # required opens a call to the one tool, up to its arguments (whatever the random model writes after that)
    chat = ChatFormat.of(service.policy, TOOLS)
    assert prompts["required"][: len(prompts["auto"])] == prompts["auto"] == prompts["none"]
    forced = service.tokenizer.decode(prompts["required"][len(prompts["auto"]) :])
    closing = f"{chat.reasoning.close}\n\n" if chat.reasoning and chat.prompt_opens_reasoning else ""
    assert "calculate" in forced and (closing + chat.tool_format.forced_prefix("calculate")).startswith(forced)


MARKUP = [
    "<tool_call>", "</tool_call>", "<function=calculate>", "<parameter=expression>", "</parameter>", "</function>",
    "<think>", "</think>", "[TOOL_CALLS]", "[ARGS]", '{"name": "calculate", "arguments": ', '"parameters": ',
    '{"expression": "6"}}', "<|python_tag|>", "STOP", "\n", " ", "{", "}", '"', "<", "</", "<tool", "[TOOL", "</thi",
    "é", '<tool_call>\n{"name": "calculate", "arguments": {"expression": "6 * 7"}}\n</tool_call>',
    "<tool_call>\n<function=calculate>\n<parameter=expression>\n6 * 7\n</parameter>\n</function>\n</tool_call>",
    '{"name": "calculate", "parameters": {"expression": "6 * 7"}}',
    '[TOOL_CALLS] [{"name": "calculate", "arguments": {"expression": "6 * 7"}}]',
]  # fmt: skip


@pytest.fixture(scope="module")
def chats(tmp_path_factory, tiny_tokenizer) -> list[ChatFormat]:
    """The tiny policy's chat format and those of four real families."""
    out = [ChatFormat(tiny_tokenizer, TOOLS)]
    for family in ("qwen3", "qwen3_coder", "llama3", "mistral"):
        path = save_family_model(family, tmp_path_factory.mktemp(family))
        tokenizer = load_tokenizer(str(path))
        out.append(ChatFormat(tokenizer, TOOLS, chat_settings(PolicyConfig(model=str(path)), tokenizer)))
    return out


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.one_of(st.sampled_from(MARKUP), st.text(max_size=3)), max_size=12).map("".join),
    st.lists(st.integers(1, 6), min_size=1, max_size=40),
    st.integers(0, 4),
    st.booleans(),
    st.booleans(),
)
def test_any_turn_streams_certain_deltas_that_join_to_its_message(chats, text, cuts, which, parse_tools, stops):
    chat, stop = chats[which], ("STOP",) if stops else ()
    if stop and "STOP" in text:  # sampling ends at a stop string, which the message drops
        text = text[: text.index("STOP") + 4]
    final = text[:-4] if stop and text.endswith("STOP") else text
    message = reply_message(chat.parse(final, id_prefix="c"), chat.content_of(final), parse_tools=parse_tools)
    turn, deltas, at = TurnStream(chat, parse_tools=parse_tools, stop=stop), [], 0
    for cut in cuts * (len(text) // len(cuts) + 1):
        deltas += turn.feed(text[at : at + cut])
        at += cut
    deltas += turn.finish(message)
    for key in ("content", "reasoning_content"):
        assert "".join(d.get(key, "") for d in deltas) == (message.get(key) or "")
    calls: dict[int, dict] = {}
    for delta in deltas:
        for call in delta.get("tool_calls", ()):
            entry = calls.setdefault(call["index"], {"id": call.get("id"), "name": "", "arguments": ""})
            entry["name"] += call["function"].get("name", "")
            entry["arguments"] += call["function"]["arguments"]
    expected = [{"id": c["id"], **c["function"]} for c in message.get("tool_calls") or ()]
    assert [calls[k] for k in sorted(calls)] == expected


@pytest.mark.parametrize("text", ["héllo wörld: 日本語 🙂 ok", '<tool_call>\n{"a": "ü€"}</tool_call>'])
def test_the_detokenizer_hands_out_whole_characters_that_join_to_the_text(chats, text):
    for chat in chats:
        ids = chat.encode(text)
        detokenizer = IncrementalDetokenizer(chat.tokenizer)
        pieces = [detokenizer.push(i) for i in ids]
        assert "".join(pieces) == chat.tokenizer.decode(ids, skip_special_tokens=False) == text
        assert not any("\ufffd" in piece for piece in pieces)
        assert "" in pieces and len([p for p in pieces if p]) > 3  # a character over several tokens comes out once


def test_forced_calls_fit_their_tools_schema_at_any_temperature(client):
    """The tiny policy learned `lookup(entity, field)` and arithmetic; forced to call a `lookup(query)` it would
    write the arguments it learned. Constrained decoding keeps the arguments to the schema, so every forced turn
    is a call that fits, sampled or greedy, streamed or not, and the forced markup never comes back as content."""
    for k in range(3):
        for choice in ("required", {"type": "function", "function": {"name": "lookup"}}):
            for temperature, seed in ((0.0, 0), (1.0, 1), (1.0, 2)):
                request = {"model": "tiny", "messages": task_messages(k), "tools": TWO_TOOLS, "tool_choice": choice}
                request |= {"temperature": temperature, "seed": seed, "max_tokens": 64}
                reply = client.chat.completions.create(**request).choices[0]
                assert reply.finish_reason == "tool_calls" and not reply.message.content, reply.message
                (call,) = reply.message.tool_calls
                wanted = {"calculate": "expression", "lookup": "query"}[call.function.name]
                assert list(json.loads(call.function.arguments)) == [wanted], call.function.arguments
                if seed == 2:
                    out = streamed(client, **request)
                    assert joined_calls(out) == calls_of(reply.message) and not out["content"]
