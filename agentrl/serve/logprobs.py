"""Per-token log-probabilities in the OpenAI chat format (`choices[i].logprobs.content`).

Every sampled token is listed, the end-of-turn token included (training scores it); tokens a `tool_choice` forced
are not (they were not sampled). `logprob` is the token's log-probability under the distribution it was sampled
from: the model's, after temperature, top-p and any ids `tool_choice: none` forbade; it is the number the
recorded episode keeps and the learner compares with. `top_logprobs` (k ≤ 20) are the k most likely tokens of that
same distribution, most likely first, so the sampled token's entry agrees with its own logprob. (OpenAI reports the
model's distribution before temperature; at temperature 0 the sampling distribution is a point mass: the chosen
token has 0 and every other -9999.) A policy that cannot report alternatives lists the sampled token alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from agentrl.policy.decode_loop import TokenStep
from agentrl.serve.sampling import RequestError
from agentrl.types import Completion

MAX_TOP_LOGPROBS = 20
FLOOR = -9999.0
"""What an impossible token's log-probability (-inf, not JSON) is reported as."""


def top_logprobs_of(body: dict[str, Any]) -> int:
    """The `top_logprobs` a request asks for (0 without), checked."""
    k = body.get("top_logprobs")
    if k is None:
        return 0
    if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k <= MAX_TOP_LOGPROBS:
        raise RequestError(f"top_logprobs must be an integer in [0, {MAX_TOP_LOGPROBS}]", param="top_logprobs")
    if k and not body.get("logprobs"):
        raise RequestError("top_logprobs needs logprobs: true", param="top_logprobs")
    return k


def _entry(tokenizer: Any, token_id: int, logprob: float) -> dict[str, Any]:
    token = tokenizer.decode([token_id], skip_special_tokens=False)
    value = logprob if math.isfinite(logprob) else FLOOR
    return {"token": token, "logprob": max(value, FLOOR), "bytes": list(token.encode())}


def token_logprob(tokenizer: Any, step: TokenStep, k: int) -> dict[str, Any]:
    """The entry of one sampled token, with the `k` alternatives its step carries."""
    entry = _entry(tokenizer, step.token_id, step.logprob)
    if k and step.top:
        entry["top_logprobs"] = [_entry(tokenizer, i, lp) for i, lp in step.top[:k]]
    else:
        entry["top_logprobs"] = [dict(entry)] if k else []
    return entry


def content_logprobs(
    tokenizer: Any, completion: Completion, steps: Sequence[TokenStep] | None, k: int
) -> list[dict[str, Any]]:
    """The entries of a whole turn: from the policy's steps when it streamed them (they carry alternatives),
    else from the completion alone."""
    if steps is None or len(steps) != len(completion.token_ids):
        steps = [TokenStep(t, lp) for t, lp in zip(completion.token_ids, completion.logprobs, strict=False)]
    return [token_logprob(tokenizer, step, k) for step in steps]
