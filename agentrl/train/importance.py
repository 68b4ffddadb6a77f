"""Importance weights for the sampler–learner mismatch, registered by name in `TIS_MODES` (`trainer.tis_mode`,
with `trainer.tis_cap` and `trainer.tis_floor`).

The sampler (vLLM, quantised or stale weights, a carried partial rollout) and the learner disagree on token
probabilities, so the batch comes from π_sampler while the loss assumes π_old. Each token's policy loss is
multiplied by a detached weight built from ρ = π_old / π_sampler (per token) or ρ_i = Π_t ρ_t (per sequence,
over its loss tokens), with C = `tis_cap` and F = `tis_floor`:

- `token`: min(ρ_t, C) — truncated importance sampling, TIS (Yao et al. 2025, "Your Efficient RL Framework
  Secretly Brings You Off-Policy RL Training");
- `sequence`: min(ρ_i, C) on every token of sequence i — sequence-level TIS (same);
- `token_mask`: ρ_t where F ≤ ρ_t ≤ C, else 0 — masked importance sampling, MIS (Liu et al. 2025, "When Speed
  Kills Stability: Demystifying RL Collapse from the Training-Inference Mismatch"); with F > 0 it is IcePop's
  two-sided token mask (Ling Team 2025, Ring-1T: F = 0.5, C = 5);
- `sequence_mask`: ρ_i where F ≤ ρ_i ≤ C, else 0 for the whole sequence — sequence-level MIS (Liu et al.).

Deviations: the dropped tokens of the `_mask` modes stay in the aggregation's denominators (the estimator's 1/N
over all sampled tokens; verl and slime also take them out of the loss mask), so the denominators are known before
the forward pass and gradient accumulation stays exact. Log-ratios are clamped to ±20 before exp. The truncating
modes have no floor (the objective refuses `tis_floor` with them).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from agentrl.errors import ConfigError
from agentrl.train.config import TrainerConfig
from agentrl.train.surrogate import MAX_LOG_RATIO

DEFAULT_TIS_CAP = 2.0
"""`trainer.tis_cap` where None means on (Yao et al. 2025's token-level cap)."""

ImportanceWeightFn = Callable[..., tuple[Tensor, Tensor]]
"""fn(log_ratio_B_T, *, cap, floor) -> (weights_B_T, rejected_B_T): log_ratio is log π_old − log π_sampler per
token, detached and 0 on masked tokens; `rejected` is True where the weight was truncated or the token dropped."""


def _sequence_log_ratio(log_ratio_B_T: Tensor) -> Tensor:
    """log Π_t ρ_t over the row, on every position of the row."""
    return log_ratio_B_T.sum(-1, keepdim=True).expand_as(log_ratio_B_T)


def _ratio(log_ratio_B_T: Tensor) -> Tensor:
    return torch.exp(log_ratio_B_T.clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO))


def token_tis(log_ratio_B_T: Tensor, *, cap: float, floor: float) -> tuple[Tensor, Tensor]:
    """TIS (Yao et al. 2025): min(ρ_t, C)."""
    ratio_B_T = _ratio(log_ratio_B_T)
    return ratio_B_T.clamp(max=cap), ratio_B_T > cap


def sequence_tis(log_ratio_B_T: Tensor, *, cap: float, floor: float) -> tuple[Tensor, Tensor]:
    """Sequence-level TIS (Yao et al. 2025): min(Π_t ρ_t, C) on every token of the sequence."""
    return token_tis(_sequence_log_ratio(log_ratio_B_T), cap=cap, floor=floor)


def token_mis(log_ratio_B_T: Tensor, *, cap: float, floor: float) -> tuple[Tensor, Tensor]:
    """MIS (Liu et al. 2025) / IcePop with a floor: ρ_t inside [F, C], else 0."""
    ratio_B_T = _ratio(log_ratio_B_T)
    dropped_B_T = (ratio_B_T > cap) | (ratio_B_T < floor)
    return torch.where(dropped_B_T, 0.0, ratio_B_T), dropped_B_T


def sequence_mis(log_ratio_B_T: Tensor, *, cap: float, floor: float) -> tuple[Tensor, Tensor]:
    """Sequence-level MIS (Liu et al. 2025): Π_t ρ_t inside [F, C] on every token of the sequence, else 0."""
    return token_mis(_sequence_log_ratio(log_ratio_B_T), cap=cap, floor=floor)


TIS_MODES: dict[str, ImportanceWeightFn] = {
    "token": token_tis,
    "sequence": sequence_tis,
    "token_mask": token_mis,
    "sequence_mask": sequence_mis,
}


def importance_weights(
    mode: str,
    old_logprobs_B_T: Tensor,
    sampler_logprobs_B_T: Tensor,
    mask_B_T: Tensor,
    cap: float,
    floor: float = 0.0,
) -> tuple[Tensor, Tensor]:
    """(weights, rejected) per token, both detached: the `TIS_MODES` entry `mode`'s weight, and 1.0 where ρ (per
    token or per sequence) is outside [`floor`, `cap`], i.e. where the weight was truncated or the token dropped.
    Rows are whole sequences; masked tokens add nothing to a sequence's ratio."""
    if mode not in TIS_MODES:
        raise ConfigError(f"unknown trainer.tis_mode {mode!r}; known: {', '.join(TIS_MODES)}")
    mask_B_T = mask_B_T.bool()
    log_ratio_B_T = torch.where(mask_B_T, (old_logprobs_B_T - sampler_logprobs_B_T).detach(), 0.0)
    weights_B_T, rejected_B_T = TIS_MODES[mode](log_ratio_B_T, cap=cap, floor=floor)
    return weights_B_T, rejected_B_T.to(weights_B_T.dtype)


def resolve_tis_cap(config: TrainerConfig, precision: str, *, remote_sampler: bool) -> float:
    """`trainer.tis_cap`, None resolved: on (`DEFAULT_TIS_CAP`) where the sampler's log-probs differ from the
    learner's by more than fp32 rounding (a bf16 precision, a remote sampler), else off."""
    if config.tis_cap is not None:
        return config.tis_cap
    return DEFAULT_TIS_CAP if remote_sampler or precision != "fp32" else 0.0
