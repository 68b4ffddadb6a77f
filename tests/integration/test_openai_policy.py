"""The OpenAI-compatible completions backend against a scripted server on 127.0.0.1 (a double for the model)."""

import pytest
from fastapi import FastAPI

from agentrl.policy.openai_policy import OpenAICompletionsPolicy
from agentrl.protocols import SamplingParams
from agentrl.testing import serve_in_thread

pytestmark = pytest.mark.integration


def scripted_completions_server(tokenizer, text: str, *, ids_as_tokens: bool = True) -> tuple[FastAPI, list]:
    """Answers every completion request with `text` (+ end of turn), reporting tokens as ids like vLLM does."""
    app, seen = FastAPI(), []
    ids = tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]

    @app.post("/v1/completions")
    async def completions(body: dict):
        seen.append(body)
        tokens = [f"token_id:{i}" if ids_as_tokens else tokenizer.decode([i]) for i in ids]
        top = [{t: -0.1, "token_id:0": -2.5} for t in tokens]
        return {
            "id": "cmpl-1",
            "object": "text_completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "text": tokenizer.decode(ids, skip_special_tokens=False),
                    "finish_reason": "stop",
                    "logprobs": {
                        "tokens": tokens,
                        "token_logprobs": [-0.1] * len(ids),
                        "top_logprobs": top,
                        "text_offset": [0] * len(ids),
                    },
                }
            ],
            "usage": {"prompt_tokens": len(body["prompt"]), "completion_tokens": len(ids), "total_tokens": 0},
        }

    return app, seen


async def test_token_ids_logprobs_and_entropy_proxy(tiny_tokenizer):
    app, seen = scripted_completions_server(tiny_tokenizer, "42")
    with serve_in_thread(app) as url:
        policy = OpenAICompletionsPolicy(tiny_tokenizer, base_url=url + "/v1", model="m")
        out = await policy.generate([1, 2, 3], SamplingParams(max_new_tokens=16, temperature=0.7, seed=5))
    expected = tiny_tokenizer("42", add_special_tokens=False)["input_ids"] + [tiny_tokenizer.eos_token_id]
    assert list(out.token_ids) == expected
    assert out.text == "42" and out.finish_reason == "stop"
    assert all(lp == pytest.approx(-0.1) for lp in out.logprobs)
    assert all(e > 0 for e in out.entropies)
    assert seen[0]["prompt"] == [1, 2, 3] and seen[0]["return_tokens_as_token_ids"] is True
    assert seen[0]["temperature"] == 0.7 and seen[0]["seed"] == 5
    assert policy.retokenized_completions == 0


async def test_servers_without_token_ids_are_counted_as_retokenized(tiny_tokenizer):
    app, _ = scripted_completions_server(tiny_tokenizer, "42", ids_as_tokens=False)
    with serve_in_thread(app) as url:
        policy = OpenAICompletionsPolicy(tiny_tokenizer, base_url=url + "/v1", model="m")
        out = await policy.generate([1], SamplingParams(max_new_tokens=16))
    assert policy.retokenized_completions == 1 and out.token_ids[-1] == tiny_tokenizer.eos_token_id


async def test_an_unreachable_endpoint_is_a_sampler_error(tiny_tokenizer):
    """The episode books it as an infrastructure failure, never as a policy mistake."""
    from agentrl.errors import InfraError, SamplerError

    policy = OpenAICompletionsPolicy(tiny_tokenizer, base_url="http://127.0.0.1:9/v1", model="m", max_retries=0)
    with pytest.raises(SamplerError, match="127.0.0.1:9") as raised:
        await policy.generate([1, 2, 3], SamplingParams(max_new_tokens=4))
    assert isinstance(raised.value, InfraError)
