"""Batched autoregressive sampling with a Hugging Face causal LM, returning what RL needs.

`sample_batch` runs many prompts of different lengths through one KV-cached decoding loop (left padding) and
returns, per row, the sampled ids with their sampler log-probabilities and the entropy of the sampling
distribution. Rows that finish are dropped from the batch (and from the cache) so a long tail costs only its
own rows. Each row samples from its own seeded generator, so a trajectory's draws do not depend on which other
requests happened to share its batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from agentrl.protocols import SamplingParams


@dataclass
class RowResult:
    token_ids: list[int]
    logprobs: list[float]
    entropies: list[float]
    finish_reason: str  # "stop" | "tool_call" | "length"


def _filter_top_p(logprobs_R_V: torch.Tensor, top_p_R: torch.Tensor) -> torch.Tensor:
    """Mask out tokens outside each row's nucleus (the smallest set with mass ≥ top_p)."""
    sorted_lp, order = logprobs_R_V.sort(dim=-1, descending=True)
    cumulative = sorted_lp.exp().cumsum(-1)
    drop_sorted = (cumulative - sorted_lp.exp()) >= top_p_R[:, None]
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return logprobs_R_V.masked_fill(drop, float("-inf")).log_softmax(-1)


def _choose(
    logits_R_V: torch.Tensor, params: Sequence[SamplingParams], generators: Sequence[torch.Generator]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Sample one token per row; return (tokens_R, sampler logprobs_R, entropies_R)."""
    logits_R_V = logits_R_V.float()
    temps = torch.tensor([max(p.temperature, 1e-6) for p in params], device=logits_R_V.device)
    logprobs_R_V = (logits_R_V / temps[:, None]).log_softmax(-1)
    top_p = torch.tensor([p.top_p for p in params], device=logits_R_V.device)
    if bool((top_p < 1.0).any()):
        logprobs_R_V = _filter_top_p(logprobs_R_V, top_p)
    probs_R_V = logprobs_R_V.exp()
    entropies_R = -(probs_R_V * logprobs_R_V.nan_to_num(neginf=0.0)).sum(-1)
    tokens = []
    for r, (p, g) in enumerate(zip(params, generators, strict=False)):
        if p.temperature <= 0:
            tokens.append(int(logprobs_R_V[r].argmax()))
        else:
            tokens.append(int(torch.multinomial(probs_R_V[r], 1, generator=g)))
    tokens_R = torch.tensor(tokens, device=logits_R_V.device)
    return tokens_R, logprobs_R_V.gather(-1, tokens_R[:, None])[:, 0], entropies_R


@torch.inference_mode()
def sample_batch(
    model: torch.nn.Module,
    prompts: Sequence[Sequence[int]],
    params: Sequence[SamplingParams],
    *,
    eos_token_ids: set[int],
    pad_token_id: int,
    stop_hit: Callable[[int, list[int]], bool] | None = None,
    seeds: Sequence[int] | None = None,
) -> list[RowResult]:
    """Sample a continuation for every prompt. `stop_hit(row, ids)` reports a stop string at the end of ids."""
    from transformers import DynamicCache

    device = next(model.parameters()).device
    n = len(prompts)
    generators = []
    for r in range(n):
        g = torch.Generator(device="cpu")
        g.manual_seed(int(seeds[r]) if seeds is not None else int(torch.randint(0, 2**62, (1,))))
        generators.append(g)
    longest = max(len(p) for p in prompts)
    input_ids = torch.full((n, longest), pad_token_id, dtype=torch.long)
    attention = torch.zeros((n, longest), dtype=torch.long)
    for r, p in enumerate(prompts):
        input_ids[r, longest - len(p) :] = torch.tensor(list(p), dtype=torch.long)
        attention[r, longest - len(p) :] = 1
    input_ids, attention = input_ids.to(device), attention.to(device)
    results = [RowResult([], [], [], "length") for _ in range(n)]
    live = list(range(n))  # original row index of each batch row
    cache = DynamicCache()
    step_input = input_ids
    max_new = max(p.max_new_tokens for p in params)
    for _ in range(max_new):
        positions = (attention.cumsum(-1) - 1).clamp(min=0)[:, -step_input.shape[1] :]
        out = model(
            input_ids=step_input,
            attention_mask=attention,
            position_ids=positions,
            past_key_values=cache,
            use_cache=True,
        )
        cache = out.past_key_values
        tokens, logprobs, entropies = _choose(
            out.logits[:, -1, :], [params[r] for r in live], [generators[r] for r in live]
        )
        keep = []
        for b, r in enumerate(live):
            res, tok = results[r], int(tokens[b])
            res.token_ids.append(tok)
            res.logprobs.append(float(logprobs[b]))
            res.entropies.append(float(entropies[b]))
            if tok in eos_token_ids:
                res.finish_reason = "stop"
            elif stop_hit is not None and stop_hit(r, res.token_ids):
                res.finish_reason = "tool_call"
            elif len(res.token_ids) >= params[r].max_new_tokens:
                res.finish_reason = "length"
            else:
                keep.append(b)
        if not keep:
            break
        step_input = tokens[:, None]
        attention = torch.cat([attention, torch.ones((len(live), 1), dtype=attention.dtype, device=device)], dim=1)
        if len(keep) < len(live):
            index = torch.tensor(keep, device=device)
            cache.batch_select_indices(index)
            step_input, attention = step_input[index], attention[index]
            live = [live[b] for b in keep]
    return results
