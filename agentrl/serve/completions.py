"""`/v1/completions` over token ids: the protocol of `agentrl.policy.openai_policy.OpenAICompletionsPolicy`.

Prompts are token ids (or a string, tokenized without special tokens); with `return_tokens_as_token_ids` (the vLLM
extension) sampled tokens are reported as `token_id:N`, so the client never re-tokenizes what was sampled.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

from agentrl.protocols import SamplingParams
from agentrl.serve.sampling import RequestError, choices_of


async def text_completions(
    policy: Any, body: dict[str, Any], model: str, params_of: Callable[[int, int], SamplingParams]
) -> dict[str, Any]:
    """Answer one completions request; `params_of(prompt_tokens, choice)` gives each choice's sampling params."""
    tokenizer = policy.tokenizer
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        prompt = list(tokenizer(prompt, add_special_tokens=False)["input_ids"])
    if not isinstance(prompt, list) or not prompt or not all(isinstance(t, int) for t in prompt):
        raise RequestError("prompt must be a string or a non-empty list of token ids", param="prompt")
    n = choices_of(body)
    params = [params_of(len(prompt), i) for i in range(n)]
    completions = await asyncio.gather(*(policy.generate(prompt, p) for p in params))
    as_ids = bool(body.get("return_tokens_as_token_ids"))
    choices = []
    for i, c in enumerate(completions):
        ids = list(c.token_ids)
        tokens = [f"token_id:{t}" if as_ids else tokenizer.decode([t]) for t in ids]
        keep_special = body.get("skip_special_tokens") is False
        choices.append(
            {
                "index": i,
                "text": tokenizer.decode(ids, skip_special_tokens=not keep_special),
                "finish_reason": "length" if c.finish_reason == "length" else "stop",
                "logprobs": None
                if body.get("logprobs") is None
                else {
                    "tokens": tokens,
                    "token_logprobs": list(c.logprobs),
                    "top_logprobs": [{t: lp} for t, lp in zip(tokens, c.logprobs, strict=False)],
                    "text_offset": [0] * len(ids),
                },
            }
        )
    sampled = sum(len(c.token_ids) for c in completions)
    return {
        "id": f"cmpl-{uuid.uuid4().hex}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        "usage": {"prompt_tokens": len(prompt), "completion_tokens": sampled, "total_tokens": len(prompt) + sampled},
    }
