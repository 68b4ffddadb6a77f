"""Importance weights for the sampler–learner mismatch (`trainer.tis_cap`, `trainer.tis_mode`).

The sampler (vLLM, quantised or stale weights, a carried partial rollout) and the learner disagree on token
probabilities, so the batch comes from π_sampler while the loss assumes π_old. Each token's policy loss is
multiplied by a detached weight built from ρ = π_old / π_sampler (per token) or ρ_i = Π_t ρ_t (per sequence,
over its loss tokens), with C = `tis_cap`:

- `token`: min(ρ_t, C) — truncated importance sampling, TIS (Yao et al. 2025, "Your Efficient RL Framework
  Secretly Brings You Off-Policy RL Training");
- `sequence`: min(ρ_i, C) on every token of sequence i — sequence-level TIS (same);
- `token_mask`: ρ_t where ρ_t ≤ C, else 0 — masked importance sampling, MIS (Liu et al. 2025, "When Speed Kills
  Stability: Demystifying RL Collapse from the Training-Inference Mismatch");
- `sequence_mask`: ρ_i where ρ_i ≤ C, else 0 for the whole sequence — sequence-level MIS (same).

Deviation from the MIS write-ups in verl and slime, which also take the dropped tokens out of the loss mask: here
they stay in the aggregation's denominators (the estimator's 1/N over all sampled tokens), so the denominators are
known before the forward pass and gradient accumulation stays exact.
"""

from __future__ import annotations

import torch
from torch import Tensor

from agentrl.errors import ConfigError
from agentrl.train.surrogate import MAX_LOG_RATIO

TIS_MODES = ("token", "sequence", "token_mask", "sequence_mask")


def importance_weights(
    mode: str, old_logprobs_B_T: Tensor, sampler_logprobs_B_T: Tensor, mask_B_T: Tensor, cap: float
) -> tuple[Tensor, Tensor]:
    """(weights, over_cap) per token, both detached: the `mode`'s weight, and 1.0 where ρ (per token or per
    sequence) exceeds `cap`, i.e. where the weight was truncated or the token dropped. Rows are whole sequences."""
    mask_B_T = mask_B_T.bool()
    log_ratio_B_T = torch.where(mask_B_T, (old_logprobs_B_T - sampler_logprobs_B_T).detach(), 0.0)
    if mode in ("sequence", "sequence_mask"):
        log_ratio_B_T = log_ratio_B_T.sum(-1, keepdim=True).expand_as(log_ratio_B_T)
    elif mode not in ("token", "token_mask"):
        raise ConfigError(f"unknown trainer.tis_mode {mode!r}; known: {', '.join(TIS_MODES)}")
    ratio_B_T = torch.exp(log_ratio_B_T.clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO))
    over_cap_B_T = ratio_B_T > cap
    if mode.endswith("_mask"):
        weights_B_T = torch.where(over_cap_B_T, 0.0, ratio_B_T)
    else:
        weights_B_T = ratio_B_T.clamp(max=cap)
    return weights_B_T, over_cap_B_T.to(weights_B_T.dtype)


def truncated_importance_weights(old_logprobs_B_T: Tensor, sampler_logprobs_B_T: Tensor, cap: float) -> Tensor:
    """Token-level TIS weights min(π_old / π_sampler, cap), detached (`importance_weights` with mode `token`)."""
    mask_B_T = torch.ones_like(old_logprobs_B_T, dtype=torch.bool)
    return importance_weights("token", old_logprobs_B_T, sampler_logprobs_B_T, mask_B_T, cap)[0]
