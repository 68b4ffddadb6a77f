"""Sampling every row of a decoding step on the device: per-row temperature, top-p, banned ids and seed.

The sampling distribution of a row is softmax(logits / T) with banned ids at probability 0 and, when the row asks
for top-p, everything outside its nucleus at 0 too (renormalised). The log-probability and entropy reported
with a token describe exactly that distribution, so the learner can compare them with its own.

Randomness is counter-based. Each row carries two 32-bit keys derived from its seed (`row_keys`); the uniform
number it draws at its n-th token is a hash of (keys, n) computed with integer tensor ops (`uniform_R`). A row's
draws therefore depend on its seed and its step only, never on which other rows share the batch, and a step
costs the same handful of kernels for one row or a hundred (a generator per row would launch one per row). One
uniform per row is enough: the token is found by inverting the row's cumulative distribution, accumulated in
float64 so that even ids of probability 1e-12 keep their share. Greedy rows (temperature 0) take the argmax.

Everything a step hands to the host (token, log-prob, entropy, and the top-k alternatives of rows that ask) is
packed into one float32 tensor (`sample_step`), so a step costs one device-to-host transfer.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

_MASK32 = 0xFFFFFFFF
_M1 = 0x7FEB352D
_M2_LOW = 0x846CA68B - 2**31
"""The hash's second multiplier less its top bit: x * M2 mod 2^32 is computed as (x * _M2_LOW) with bit 31 flipped
when x is odd, so every product stays below 2^63 (exact in int64, no reliance on overflow)."""


def mix32(x: torch.Tensor) -> torch.Tensor:
    """A bijective 32-bit integer hash (lowbias32's constants) of int64 tensors holding values in [0, 2^32)."""
    x = x ^ (x >> 16)
    x = (x * _M1) & _MASK32
    x = x ^ (x >> 15)
    x = ((x * _M2_LOW) & _MASK32) ^ ((x & 1) << 31)
    return x ^ (x >> 16)


def mix32_int(x: int) -> int:
    """`mix32` of one Python int (the host derives row keys with it)."""
    x &= _MASK32
    x ^= x >> 16
    x = (x * _M1) & _MASK32
    x ^= x >> 15
    x = (x * (_M2_LOW + 2**31)) & _MASK32
    return x ^ (x >> 16)


def row_keys(seed: int) -> tuple[int, int]:
    """Two 32-bit keys of a row from its seed (any int; its low 64 bits count)."""
    seed &= 2**64 - 1
    first = mix32_int(mix32_int(seed & _MASK32) ^ (seed >> 32))
    return first, mix32_int(first ^ 0x9E3779B9)


def uniform_R(keys_R2: torch.Tensor, steps_R: torch.Tensor) -> torch.Tensor:
    """One uniform number in [0, 1 - 2^-52] per row, float64, a function of the row's keys and step only."""
    hashes_R2 = mix32(keys_R2 ^ steps_R[:, None])
    bits_R = (hashes_R2[:, 0] << 20) | (hashes_R2[:, 1] >> 12)
    return bits_R.double() * 2.0**-52


def nucleus_logprobs_R_V(logprobs_R_V: torch.Tensor, top_p_R: torch.Tensor) -> torch.Tensor:
    """Keep each row's nucleus (the most likely ids whose mass first reaches top_p) and renormalise; a row whose
    top_p is above 1 keeps everything."""
    sorted_R_V, order_R_V = logprobs_R_V.sort(dim=-1, descending=True)
    probs_R_V = sorted_R_V.exp()
    drop_sorted_R_V = (probs_R_V.cumsum(-1) - probs_R_V) >= top_p_R[:, None]
    drop_R_V = drop_sorted_R_V.scatter(-1, order_R_V, drop_sorted_R_V)
    return logprobs_R_V.masked_fill(drop_R_V, float("-inf")).log_softmax(-1)


def inverse_cdf_R(probs_R_V: torch.Tensor, uniform_R_: torch.Tensor) -> torch.Tensor:
    """The id whose cumulative-probability interval holds `uniform × total` (ids of probability 0 never)."""
    cdf_R_V = probs_R_V.double().cumsum(-1)
    target_R1 = (uniform_R_ * cdf_R_V[:, -1])[:, None]
    return torch.searchsorted(cdf_R_V, target_R1, right=True)[:, 0]


@dataclass(frozen=True)
class StepPlan:
    """What the host knows about a step's rows without reading the device: which branches the step needs."""

    greedy: str = "none"
    """`none`, `some` or `all` rows at temperature 0."""
    top_p: bool = False
    """Some row asks for top-p."""
    top_k: int = 0
    """Most alternatives any row asks for (0: none)."""


def sample_step(
    logits_R_V: torch.Tensor,
    temperature_R: torch.Tensor,
    top_p_R: torch.Tensor,
    keys_R2: torch.Tensor,
    steps_R: torch.Tensor,
    plan: StepPlan,
    banned_R_V: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample one token per row; returns (tokens_R, packed_R_K) where packed holds per row: token id, log-prob,
    entropy, then `plan.top_k` alternative log-probs and their ids (ids as floats: exact below 2^24)."""
    logits_R_V = logits_R_V.float()
    if banned_R_V is not None:
        logits_R_V = logits_R_V.masked_fill(banned_R_V, float("-inf"))
    logprobs_R_V = (logits_R_V / temperature_R[:, None]).log_softmax(-1)
    if plan.top_p:
        logprobs_R_V = nucleus_logprobs_R_V(logprobs_R_V, top_p_R)
    probs_R_V = logprobs_R_V.exp()
    # 0 * -inf is nan: ids outside the support add nothing to the entropy
    entropy_R = (probs_R_V * logprobs_R_V).nansum(-1).neg()
    if plan.greedy == "all":
        tokens_R = logprobs_R_V.argmax(-1)
    else:
        tokens_R = inverse_cdf_R(probs_R_V, uniform_R(keys_R2, steps_R))
        if plan.greedy == "some":
            tokens_R = torch.where(temperature_R <= 1e-6, logprobs_R_V.argmax(-1), tokens_R)
    chosen_R = logprobs_R_V.gather(-1, tokens_R[:, None])[:, 0]
    columns = [tokens_R.float(), chosen_R, entropy_R]
    packed_R_K = torch.stack(columns, dim=1)
    if plan.top_k > 0:
        values_R_K, ids_R_K = logprobs_R_V.topk(min(plan.top_k, logprobs_R_V.shape[-1]), dim=-1)
        packed_R_K = torch.cat([packed_R_K, values_R_K, ids_R_K.float()], dim=1)
    return tokens_R, packed_R_K
