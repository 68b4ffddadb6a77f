"""`/v1/completions` over token ids: the protocol of `agentrl.policy.openai_policy.OpenAICompletionsPolicy`.

Prompts are token ids (or a string, tokenized without special tokens); with `return_tokens_as_token_ids` (the vLLM
extension) sampled tokens are reported as `token_id:N`, so the client never re-tokenizes what was sampled.
`logprobs: k` (the legacy API's integer, 0…20) lists each sampled token's log-prob and, over a policy that reports
alternatives (the in-process one), the k most likely tokens of the sampling distribution at each step, plus the
sampled token when it is not among them (so up to k + 1, as OpenAI does); over other policies the sampled token
alone. The request does not stream (`stream: true` is refused): the training backend reads whole responses.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

from agentrl.policy.decode_loop import TokenStep
from agentrl.protocols import SamplingParams
from agentrl.serve.logprobs import FLOOR, MAX_TOP_LOGPROBS
from agentrl.serve.sampling import RequestError, choices_of
from agentrl.types import Completion


def _logprobs_asked(body: dict[str, Any]) -> int | None:
    """The request's `logprobs` (None: none asked), checked."""
    k = body.get("logprobs")
    if k is None or k is False:
        return None
    if k is True:  # the chat API's spelling, accepted here as "the sampled token only"
        return 0
    if not isinstance(k, int) or not 0 <= k <= MAX_TOP_LOGPROBS:
        raise RequestError(f"logprobs must be an integer in [0, {MAX_TOP_LOGPROBS}]", param="logprobs")
    return k


async def _sample(
    policy: Any, prompt: list[int], params: SamplingParams, k: int
) -> tuple[Completion, list[TokenStep] | None]:
    """One choice, with its steps (which carry the alternatives) when `k` asks for them and the policy has them."""
    if not k or not getattr(policy, "streams_tokens", False):
        return await policy.generate(prompt, params), None
    steps: list[TokenStep] = []
    completion = await policy.generate(prompt, params, on_token=steps.append, top_logprobs=k)
    return completion, steps


def _logprobs(tokenizer: Any, completion: Completion, steps: list[TokenStep] | None, as_ids: bool) -> dict[str, Any]:
    def name(token_id: int) -> str:
        return f"token_id:{token_id}" if as_ids else tokenizer.decode([token_id])

    ids = list(completion.token_ids)
    pieces = [tokenizer.decode([t]) for t in ids]
    tokens = [f"token_id:{t}" for t in ids] if as_ids else pieces
    if steps is None or len(steps) != len(ids):
        steps = [TokenStep(t, lp) for t, lp in zip(ids, completion.logprobs, strict=False)]
    top = []
    for step in steps:
        alternatives = {name(t): max(lp, FLOOR) for t, lp in step.top}
        alternatives.setdefault(name(step.token_id), max(step.logprob, FLOOR))
        top.append(alternatives)
    offsets, at = [], 0
    for piece in pieces:  # where each token's own text starts (exact for tokens that decode alone as in context)
        offsets.append(at)
        at += len(piece)
    return {"tokens": tokens, "token_logprobs": list(completion.logprobs), "top_logprobs": top, "text_offset": offsets}


async def text_completions(
    policy: Any, body: dict[str, Any], model: str, params_of: Callable[[int, int], SamplingParams]
) -> dict[str, Any]:
    """Answer one completions request; `params_of(prompt_tokens, choice)` gives each choice's sampling params."""
    tokenizer = policy.tokenizer
    if body.get("stream"):
        raise RequestError("/v1/completions does not stream here; /v1/chat/completions does", param="stream")
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        prompt = list(tokenizer(prompt, add_special_tokens=False)["input_ids"])
    if not isinstance(prompt, list) or not prompt or not all(isinstance(t, int) for t in prompt):
        raise RequestError("prompt must be a string or a non-empty list of token ids", param="prompt")
    k = _logprobs_asked(body)
    n = choices_of(body)
    params = [params_of(len(prompt), i) for i in range(n)]
    sampled = await asyncio.gather(*(_sample(policy, prompt, p, k or 0) for p in params))
    as_ids = bool(body.get("return_tokens_as_token_ids"))
    keep_special = body.get("skip_special_tokens") is False
    choices = [
        {
            "index": i,
            "text": tokenizer.decode(list(c.token_ids), skip_special_tokens=not keep_special),
            "finish_reason": "length" if c.finish_reason == "length" else "stop",
            "logprobs": None if k is None else _logprobs(tokenizer, c, steps, as_ids),
        }
        for i, (c, steps) in enumerate(sampled)
    ]
    total = sum(len(c.token_ids) for c, _ in sampled)
    return {
        "id": f"cmpl-{uuid.uuid4().hex}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": f"agentrl-v{getattr(policy, 'version', 0)}",  # the weights, for a pool to check
        "choices": choices,
        "usage": {"prompt_tokens": len(prompt), "completion_tokens": total, "total_tokens": len(prompt) + total},
    }
