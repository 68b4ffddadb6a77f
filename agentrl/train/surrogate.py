"""The clipped importance-ratio surrogate that the PPO-family losses share, and the overflow-safe ratio it clips."""

from __future__ import annotations

import torch
from torch import Tensor

MAX_LOG_RATIO = 20.0
"""exp() of a log-ratio beyond this overflows float32 long before it means anything; verl clamps the same way."""


def importance_ratio(logprobs_B_T: Tensor, old_logprobs_B_T: Tensor) -> Tensor:
    """ρ = exp(logπ − logπ_old) per token, the log-ratio clamped to ±`MAX_LOG_RATIO` first."""
    return torch.exp((logprobs_B_T - old_logprobs_B_T).clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO))


def clipped_surrogate(
    ratio_B_T: Tensor, advantages_B_T: Tensor, clip_low: float, upper: float | Tensor, dual_clip: float
) -> tuple[Tensor, dict[str, Tensor]]:
    """max(−A·ρ, −A·clip(ρ, 1 − ε_low, upper)), then the dual clip min(·, −A·c) for A < 0, with stats: PPO's clipped
    surrogate (Schulman et al. 2017) with the dual clip of Ye et al. 2020, as verl's `compute_policy_loss`.

    `upper` may be a tensor (AEPO's gradient-carrying bound); the clamp is a `where`, so a clamped token's
    gradient is the bound's. Stats are 0/1 float indicators of shape B_T (`clip_frac_low`, `clip_frac_high`,
    `clip_frac_dual`: where that clip is active, i.e. the token's gradient is cut off) and the detached `ratio`.
    """
    lower = 1.0 - clip_low
    upper_value = upper.detach() if isinstance(upper, Tensor) else upper
    clamped_B_T = torch.where(ratio_B_T > upper_value, upper, ratio_B_T)
    clamped_B_T = torch.where(ratio_B_T < lower, torch.full_like(ratio_B_T, lower), clamped_B_T)
    pg1_B_T = -advantages_B_T * ratio_B_T
    pg2_B_T = -advantages_B_T * clamped_B_T
    loss_B_T = torch.maximum(pg1_B_T, pg2_B_T)
    clipped_B_T = pg2_B_T > pg1_B_T
    dual_B_T = torch.zeros_like(clipped_B_T)
    if dual_clip > 0:
        pg3_B_T = -advantages_B_T * dual_clip
        dual_B_T = (advantages_B_T < 0) & (pg3_B_T < loss_B_T)
        loss_B_T = torch.where(dual_B_T, pg3_B_T, loss_B_T)
    ratio_B_T = ratio_B_T.detach()
    stats = {
        "clip_frac_low": (clipped_B_T & (ratio_B_T < 1.0)).to(loss_B_T.dtype),
        "clip_frac_high": (clipped_B_T & (ratio_B_T > 1.0)).to(loss_B_T.dtype),
        "clip_frac_dual": dual_B_T.to(loss_B_T.dtype),
        "ratio": ratio_B_T,
    }
    return loss_B_T, stats
