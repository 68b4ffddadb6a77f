"""`agentrl serve` through the official openai SDK (sync, async, streaming, tool calls) and litellm, on 127.0.0.1.

Protocol tests run the server over `ScriptedPolicy` (a double for the model) so that tool calls are certain;
token-exactness tests run it over the shipped tiny policy and compare with in-process sampling.
"""

import json

import pytest

from agentrl.protocols import SamplingParams
from agentrl.rollout.chat import ChatFormat, parse_tool_calls
from agentrl.serve.app import build_service, create_app
from agentrl.serve.chat_completions import ChatService
from agentrl.testing import ScriptedPolicy, serve_in_thread

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
    return "The answer is 42." if "<tool_response>" in prompt else CALL


@pytest.fixture(scope="module")
def scripted_url(tiny_tokenizer):
    service = ChatService(ScriptedPolicy(tiny_tokenizer, scripted), ("scripted",), context_tokens=1024)
    with serve_in_thread(create_app(service)) as url:
        yield url


@pytest.fixture(scope="module")
def tiny_service():
    return build_service("tiny", device="cpu")


def follow_up(message) -> list[dict]:
    call = message.tool_calls[0]
    return QUESTION + [
        message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "42"},
    ]


def test_sync_sdk_models_and_tool_call_round_trip(scripted_url):
    from openai import OpenAI

    client = OpenAI(base_url=scripted_url + "/v1", api_key="k")
    assert [m.id for m in client.models.list().data] == ["scripted"]
    first = client.chat.completions.create(model="scripted", messages=QUESTION, tools=TOOLS, temperature=0)
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    call = choice.message.tool_calls[0]
    assert call.function.name == "calculate" and json.loads(call.function.arguments) == {"expression": "6 * 7"}
    second = client.chat.completions.create(model="scripted", messages=follow_up(choice.message), tools=TOOLS)
    assert second.choices[0].message.content == "The answer is 42."
    assert second.choices[0].finish_reason == "stop" and second.usage.completion_tokens > 0


def test_tool_choice_none_returns_the_raw_text(scripted_url):
    from openai import OpenAI

    client = OpenAI(base_url=scripted_url + "/v1", api_key="k")
    out = client.chat.completions.create(model="scripted", messages=QUESTION, tools=TOOLS, tool_choice="none")
    assert out.choices[0].message.tool_calls is None and "<tool_call>" in out.choices[0].message.content


async def test_async_sdk_n_choices_with_logprobs(scripted_url, tiny_tokenizer):
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=scripted_url + "/v1", api_key="k")
    out = await client.chat.completions.create(model="scripted", messages=QUESTION, tools=TOOLS, n=3, logprobs=True)
    assert [c.index for c in out.choices] == [0, 1, 2]
    sampled = tiny_tokenizer(CALL, add_special_tokens=False)["input_ids"] + [tiny_tokenizer.eos_token_id]
    for choice in out.choices:
        assert [t.logprob for t in choice.logprobs.content] == [-0.5] * len(sampled)
        assert "".join(t.token for t in choice.logprobs.content) == tiny_tokenizer.decode(sampled)
    assert out.usage.completion_tokens == 3 * len(sampled)
    await client.close()


def test_streaming_assembles_to_the_same_message(scripted_url):
    from openai import OpenAI

    client = OpenAI(base_url=scripted_url + "/v1", api_key="k")
    stream = client.chat.completions.create(
        model="scripted", messages=QUESTION, tools=TOOLS, stream=True, stream_options={"include_usage": True}
    )
    calls, finish, usage = {}, None, None
    for chunk in stream:
        usage = chunk.usage or usage
        for choice in chunk.choices:
            for delta in choice.delta.tool_calls or ():
                entry = calls.setdefault(delta.index, {"name": "", "arguments": ""})
                entry["name"] += delta.function.name or ""
                entry["arguments"] += delta.function.arguments or ""
            finish = choice.finish_reason or finish
    assert finish == "tool_calls" and usage is not None and usage.completion_tokens > 0
    assert calls == {0: {"name": "calculate", "arguments": json.dumps({"expression": "6 * 7"})}}
    text = "".join(
        c.choices[0].delta.content or ""
        for c in client.chat.completions.create(
            model="scripted",
            messages=follow_up(
                client.chat.completions.create(model="scripted", messages=QUESTION, tools=TOOLS).choices[0].message
            ),
            tools=TOOLS,
            stream=True,
        )
        if c.choices
    )
    assert text == "The answer is 42."


def test_litellm_tool_call(scripted_url):
    import litellm

    out = litellm.completion(
        model="openai/scripted", api_base=scripted_url + "/v1", api_key="k", messages=QUESTION, tools=TOOLS
    )
    call = out.choices[0].message.tool_calls[0]
    assert call.function.name == "calculate" and json.loads(call.function.arguments) == {"expression": "6 * 7"}


def test_errors_are_openai_errors(scripted_url):
    import openai

    client = openai.OpenAI(base_url=scripted_url + "/v1", api_key="k", max_retries=0)
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="other", messages=QUESTION)
    with pytest.raises(openai.BadRequestError, match="messages"):
        client.chat.completions.create(model="scripted", messages=[])
    with pytest.raises(openai.BadRequestError, match="n must be"):
        client.chat.completions.create(model="scripted", messages=QUESTION, n=99)


async def test_tiny_chat_is_token_exact_with_in_process_sampling(tiny_service, tiny_tokenizer):
    from agentrl.scaffolds.code import tasks
    from openai import AsyncOpenAI

    task = tasks.tasks("test")[0]
    messages = [{"role": "system", "content": tasks.SYSTEM_PROMPT}, {"role": "user", "content": task.prompt}]
    prompt = ChatFormat(tiny_tokenizer, TOOLS).prompt_ids(messages)
    local = await tiny_service.policy.generate(prompt, SamplingParams(max_new_tokens=64, temperature=0.0))
    with serve_in_thread(create_app(tiny_service)) as url:
        client = AsyncOpenAI(base_url=url + "/v1", api_key="k")
        out = await client.chat.completions.create(
            model="tiny", messages=messages, tools=TOOLS, temperature=0, max_tokens=64
        )
        await client.close()
    extra = out.model_extra["agentrl"]
    assert extra["prompt_token_ids"] == prompt and extra["token_ids"] == [list(local.token_ids)]
    parsed = parse_tool_calls(local.text)
    got = out.choices[0].message
    assert [(c.function.name, json.loads(c.function.arguments)) for c in got.tool_calls or ()] == [
        (c.name, c.arguments) for c in parsed.tool_calls
    ]


async def test_completions_with_token_ids_serve_the_training_backend(tiny_service, tiny_tokenizer):
    from agentrl.policy.openai_policy import OpenAICompletionsPolicy

    prompt = ChatFormat(tiny_tokenizer).prompt_ids(QUESTION)
    params = SamplingParams(max_new_tokens=32, temperature=0.0)
    local = await tiny_service.policy.generate(prompt, params)
    with serve_in_thread(create_app(tiny_service)) as url:
        remote = OpenAICompletionsPolicy(tiny_tokenizer, base_url=url + "/v1", model="tiny")
        out = await remote.generate(prompt, params)
    assert out.token_ids == local.token_ids and out.text == local.text and out.finish_reason == local.finish_reason
    assert out.logprobs == pytest.approx(local.logprobs, abs=1e-5) and remote.retokenized_completions == 0


def test_completions_report_k_alternatives_and_refuse_to_stream(tiny_service, tiny_tokenizer):
    from openai import BadRequestError, OpenAI

    prompt = ChatFormat(tiny_tokenizer).prompt_ids(QUESTION)
    request = {"model": "tiny", "prompt": prompt, "max_tokens": 24, "temperature": 0.8, "seed": 2}
    with serve_in_thread(create_app(tiny_service)) as url:
        client = OpenAI(base_url=url + "/v1", api_key="k", max_retries=0)
        for k in (0, 3):
            out = client.completions.create(**request, logprobs=k, extra_body={"return_tokens_as_token_ids": True})
            lp = out.choices[0].logprobs
            assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == out.usage.completion_tokens
            for token, logprob, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs, strict=True):
                assert top[token] == pytest.approx(logprob, abs=1e-5)  # the sampled token is always listed
                alternatives = list(top.values())[:k]
                assert len(alternatives) == k and alternatives == sorted(alternatives, reverse=True)
                if len(top) > k:  # a sampled token outside the k likeliest comes last, and is less likely
                    assert len(top) == k + 1 and all(logprob <= a + 1e-6 for a in alternatives)
        with pytest.raises(BadRequestError, match="stream"):
            client.completions.create(**request, stream=True)


async def test_chat_policy_reaches_the_server_through_litellm_and_the_sdk(scripted_url, monkeypatch):
    """With a base URL the SDK talks to it (whatever the model name); without one a `provider/model` name goes
    through litellm, here to an OpenAI-compatible base litellm reads from the environment."""
    from agentrl.policy.chat_policy import OpenAIChatPolicy

    monkeypatch.setenv("OPENAI_API_BASE", scripted_url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    for name, base_url in (("openai/scripted", None), ("scripted", scripted_url + "/v1")):
        policy = OpenAIChatPolicy(name, base_url=base_url, api_key="k" if base_url else None)
        assert policy.litellm == (base_url is None)
        reply = await policy.chat(QUESTION, TOOLS, temperature=0.0, max_tokens=64)
        call = reply.message["tool_calls"][0]
        assert reply.finish_reason == "tool_calls" and call["function"]["name"] == "calculate"
        assert json.loads(call["function"]["arguments"]) == {"expression": "6 * 7"} and reply.completion_tokens > 0
        await policy.aclose()


def reluctant(prompt: str) -> str:
    """A model that never calls a tool unless the prompt already opened the call for it."""
    if prompt.endswith('"arguments":'):
        return '{"expression": "1 + 1"}}\n</tool_call>'
    if prompt.endswith("<tool_call>\n"):
        return '{"name": "calculate", "arguments": {"expression": "2 + 2"}}\n</tool_call>'
    return "No tool needed."


def test_tool_choice_required_and_named_force_a_call(tiny_tokenizer):
    from openai import BadRequestError, OpenAI

    service = ChatService(ScriptedPolicy(tiny_tokenizer, reluctant), ("scripted",), context_tokens=1024)
    with serve_in_thread(create_app(service)) as url:
        client = OpenAI(base_url=url + "/v1", api_key="k", max_retries=0)
        auto = client.chat.completions.create(model="scripted", messages=QUESTION, tools=TOOLS)
        assert auto.choices[0].message.tool_calls is None and auto.choices[0].message.content == "No tool needed."

        required = client.chat.completions.create(
            model="scripted", messages=QUESTION, tools=TOOLS, tool_choice="required"
        )
        call = required.choices[0].message.tool_calls[0]
        assert required.choices[0].finish_reason == "tool_calls"
        assert (call.function.name, json.loads(call.function.arguments)) == ("calculate", {"expression": "2 + 2"})

        named = {"type": "function", "function": {"name": "calculate"}}
        out = client.chat.completions.create(
            model="scripted", messages=QUESTION, tools=TOOLS, tool_choice=named, logprobs=True
        )
        call = out.choices[0].message.tool_calls[0]
        assert (call.function.name, json.loads(call.function.arguments)) == ("calculate", {"expression": "1 + 1"})
        # The forced opening was not sampled: the logprobs cover only what the model wrote after it.
        sampled = "".join(t.token for t in out.choices[0].logprobs.content)
        assert sampled.startswith('{"expression"') and "calculate" not in sampled

        with pytest.raises(BadRequestError, match="not among the tools"):
            client.chat.completions.create(
                model="scripted",
                messages=QUESTION,
                tools=TOOLS,
                tool_choice={"type": "function", "function": {"name": "nope"}},
            )
        with pytest.raises(BadRequestError, match="requires tools"):
            client.chat.completions.create(model="scripted", messages=QUESTION, tool_choice="required")
