"""Clip-Cov and KL-Cov: policy losses that single out the tokens with the largest covariance between log-prob and
advantage, the tokens that drive policy entropy down.

Cui et al. 2025, "The Entropy Mechanism of Reinforcement Learning for Reasoning Language Models" (arXiv
2505.22617; code PRIME-RL/Entropy-Mechanism-of-RL). The change of entropy under a policy-gradient step follows the
covariance of log π(y) and A(y), so a few high-covariance tokens collapse entropy; per token

    Cov_t = (log π_t − mean log π) · (A_t − mean A)        (means over the loss tokens, detached)

- Clip-Cov: among the tokens the PPO clip did not already cut whose Cov_t lies in (ω_low, ω_high), pick
  max(1, ⌊r·N⌋) at random (N = loss tokens) and drop their loss (value and gradient 0).
- KL-Cov: the max(1, ⌊k·N⌋) tokens of largest Cov_t get β·|log π_t − log π_old_t| added to the unclipped −A·ρ.

Deviation (as the paper's code): the statistics and the selection span what one call sees, which in the learner is
a micro-batch, so they depend on `trainer.max_tokens_per_microbatch` packing; the random pick uses torch's global
generator (seeded by the run's `seed`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from agentrl.train.surrogate import clipped_surrogate, importance_ratio


def token_covariance(logprobs_B_T: Tensor, advantages_B_T: Tensor, mask_B_T: Tensor) -> Tensor:
    """Cov_t = (log π_t − mean log π)·(A_t − mean A) over the loss tokens, detached; 0 where masked."""
    mask_B_T = mask_B_T.bool()
    count = mask_B_T.sum().clamp(min=1)
    logprobs_B_T = logprobs_B_T.detach()
    mean_logprob = torch.where(mask_B_T, logprobs_B_T, 0.0).sum() / count
    mean_advantage = torch.where(mask_B_T, advantages_B_T, 0.0).sum() / count
    return torch.where(mask_B_T, (logprobs_B_T - mean_logprob) * (advantages_B_T - mean_advantage), 0.0)


def clip_cov_loss(
    logprobs_B_T: Tensor,
    old_logprobs_B_T: Tensor,
    advantages_B_T: Tensor,
    *,
    clip_low: float,
    clip_high: float,
    dual_clip: float,
    mask_B_T: Tensor | None = None,
    cov_token_fraction: float = 2e-4,
    clip_cov_bounds: tuple[float, float] = (1.0, 5.0),
) -> tuple[Tensor, dict[str, Tensor]]:
    """Clip-Cov (Cui et al. 2025): `ppo_clip`'s loss with the loss of r·N random tokens whose covariance lies in
    (ω_low, ω_high) = `clip_cov_bounds` set to 0; r = `cov_token_fraction` (paper: 2e-4, ω = (1, 5)).

    Deviation: the dual clip applies as in `ppo_clip` (the paper's code has none; `trainer.dual_clip=0` matches
    it). Stats add `cov_dropped` (1.0 on the dropped tokens).
    """
    if mask_B_T is None:
        mask_B_T = torch.ones_like(logprobs_B_T, dtype=torch.bool)
    mask_B_T = mask_B_T.bool()
    loss_B_T, stats = clipped_surrogate(
        importance_ratio(logprobs_B_T, old_logprobs_B_T), advantages_B_T, clip_low, 1.0 + clip_high, dual_clip
    )
    cov_B_T = token_covariance(logprobs_B_T, advantages_B_T, mask_B_T)
    already_clipped_B_T = (stats["clip_frac_low"] + stats["clip_frac_high"]) > 0
    low, high = clip_cov_bounds
    candidates = torch.nonzero(mask_B_T & ~already_clipped_B_T & (cov_B_T > low) & (cov_B_T < high))
    count = max(1, int(cov_token_fraction * int(mask_B_T.sum())))
    chosen = candidates[torch.randperm(len(candidates), device="cpu")[:count].to(candidates.device)]
    dropped_B_T = torch.zeros_like(mask_B_T)
    dropped_B_T[chosen[:, 0], chosen[:, 1]] = True
    stats["cov_dropped"] = dropped_B_T.to(loss_B_T.dtype)
    return torch.where(dropped_B_T, torch.zeros_like(loss_B_T), loss_B_T), stats


def kl_cov_loss(
    logprobs_B_T: Tensor,
    old_logprobs_B_T: Tensor,
    advantages_B_T: Tensor,
    *,
    clip_low: float,
    clip_high: float,
    dual_clip: float,
    mask_B_T: Tensor | None = None,
    cov_token_fraction: float = 2e-4,
    kl_cov_coef: float = 1.0,
) -> tuple[Tensor, dict[str, Tensor]]:
    """KL-Cov (Cui et al. 2025): −A·ρ on every token, plus β·|log π − log π_old| on the k·N tokens of largest
    covariance; k = `cov_token_fraction` (paper: 2e-3 for 7B, 2e-4 for 32B), β = `kl_cov_coef` (1).

    As in the paper there is no clip: `clip_low`, `clip_high` and `dual_clip` are unused. At ρ ≡ 1 (one optimizer
    step per batch) the penalty's value and gradient are 0. Stats add `cov_penalised` (1.0 on the chosen tokens).
    """
    if mask_B_T is None:
        mask_B_T = torch.ones_like(logprobs_B_T, dtype=torch.bool)
    mask_B_T = mask_B_T.bool()
    ratio_B_T = importance_ratio(logprobs_B_T, old_logprobs_B_T)
    cov_B_T = token_covariance(logprobs_B_T, advantages_B_T, mask_B_T)
    num_tokens = int(mask_B_T.sum())
    chosen_B_T = torch.zeros_like(mask_B_T)
    if num_tokens:
        count = max(1, int(cov_token_fraction * num_tokens))
        ranked = torch.where(mask_B_T, cov_B_T, -torch.inf).flatten().topk(count).indices
        chosen_B_T.view(-1)[ranked] = True
    penalty_B_T = kl_cov_coef * (logprobs_B_T - old_logprobs_B_T).abs()
    loss_B_T = -advantages_B_T * ratio_B_T + torch.where(chosen_B_T, penalty_B_T, torch.zeros_like(penalty_B_T))
    zeros_B_T = torch.zeros_like(loss_B_T)
    stats = {
        "clip_frac_low": zeros_B_T,
        "clip_frac_high": zeros_B_T,
        "clip_frac_dual": zeros_B_T,
        "ratio": ratio_B_T.detach(),
        "cov_penalised": chosen_B_T.to(loss_B_T.dtype),
    }
    return loss_B_T, stats
