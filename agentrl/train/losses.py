"""Policy-gradient losses, their registry, and the per-token statistics the objective reads (entropy, log-probs).

A policy loss maps per-token log-probabilities to a per-token loss and per-token statistics:

    fn(logprobs_B_T, old_logprobs_B_T, advantages_B_T, *, clip_low, clip_high, dual_clip, mask_B_T, **options)
        -> (loss_B_T, stats: dict[str, Tensor of shape B_T])

and is registered by name in `POLICY_LOSSES` (`trainer.loss`): `ppo_clip`, `aepo`, `gspo`, `cispo`, `clip_cov`,
`kl_cov`. Keyword-only options a loss declares beyond the clip settings (`sequence_clip_low`,
`sequence_clip_high`, `cov_token_fraction`, `clip_cov_bounds`, `kl_cov_coef`) are filled from the `TrainerConfig`
fields of the same name. π_old is the policy that sampled the batch as the learner computes it
(`agentrl/train/learner.py` says why not the sampler's log-probs), so every ratio ρ = π_θ / π_old is exactly 1 on
a batch's first optimizer step: the losses named in `OFF_POLICY_LOSSES` differ from the plain policy gradient only
through ρ ≠ 1 and need several optimizer steps per batch (`trainer.minibatches_per_step`,
`trainer.update_epochs`). Aggregation is `aggregation.py`, the KL terms `kl.py`, the sampler-mismatch weights
`importance.py`, and the whole objective `objective.py`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from agentrl.train.cov_losses import clip_cov_loss, kl_cov_loss
from agentrl.train.surrogate import MAX_LOG_RATIO, clipped_surrogate, importance_ratio

PolicyLossFn = Callable[..., tuple[Tensor, dict[str, Tensor]]]

POLICY_LOSSES: dict[str, PolicyLossFn] = {}

OFF_POLICY_LOSSES: set[str] = set()
"""Registered losses that equal the plain policy gradient when ρ ≡ 1 (one optimizer step per batch)."""


def register_loss(name: str, *, off_policy_only: bool = False) -> Callable[[PolicyLossFn], PolicyLossFn]:
    """Register a policy loss under `name` (the value of `trainer.loss`); `off_policy_only`: the loss is the plain
    policy gradient at ρ ≡ 1, so the learner refuses it with one optimizer step per batch."""

    def decorator(fn: PolicyLossFn) -> PolicyLossFn:
        if name in POLICY_LOSSES:
            raise ValueError(f"policy loss {name!r} is already registered")
        POLICY_LOSSES[name] = fn
        if off_policy_only:
            OFF_POLICY_LOSSES.add(name)
        return fn

    return decorator


@register_loss("ppo_clip")
def ppo_clip_loss(
    logprobs_B_T: Tensor,
    old_logprobs_B_T: Tensor,
    advantages_B_T: Tensor,
    *,
    clip_low: float,
    clip_high: float,
    dual_clip: float,
    mask_B_T: Tensor | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """Clipped surrogate with asymmetric (clip-higher) ranges and dual clip, per token.

    With ρ = exp(logπ − logπ_old):  pg1 = −A·ρ,  pg2 = −A·clip(ρ, 1 − ε_low, 1 + ε_high),
    L = max(pg1, pg2), and for A < 0 with c = `dual_clip` > 0:  L = min(L, −A·c).

    PPO: Schulman et al. 2017, "Proximal Policy Optimization Algorithms". Clip-higher (ε_high > ε_low, default
    0.28 / 0.2): Yu et al. 2025, "DAPO: An Open-Source LLM Reinforcement Learning System at Scale". Dual clip:
    Ye et al. 2020, "Mastering Complex Control in MOBA Games with Deep Reinforcement Learning".
    Deviation: the log-ratio is clamped to ±20 before exp (as in verl), so far-off-policy tokens cannot
    overflow. `mask_B_T` is unused (per-token loss).

    Returns `loss_B_T` and `stats` with 0/1 float indicators of shape B_T (`clip_frac_low`, `clip_frac_high`,
    `clip_frac_dual`: where that clip is active, i.e. the token's gradient is cut off) and the detached
    `ratio`; the caller averages them over its loss mask.
    """
    ratio_B_T = importance_ratio(logprobs_B_T, old_logprobs_B_T)
    return clipped_surrogate(ratio_B_T, advantages_B_T, clip_low, 1.0 + clip_high, dual_clip)


@register_loss("aepo", off_policy_only=True)
def aepo_loss(
    logprobs_B_T: Tensor,
    old_logprobs_B_T: Tensor,
    advantages_B_T: Tensor,
    *,
    clip_low: float,
    clip_high: float,
    dual_clip: float,
    mask_B_T: Tensor | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """AEPO entropy-balanced clipping: PPO clip whose upper bound keeps its gradient (stop-gradient form).

    Dong et al. 2025, "Agentic Entropy-Balanced Policy Optimization" (AEPO, arXiv 2510.14545), code
    `compute_policy_loss_entropy_balanced_clipping`: upper = (1 + ε_high) / sg(ρ) · ρ, whose value is
    1 + ε_high and whose gradient is (1 + ε_high)·∇logπ. Where A > 0 and ρ > 1 + ε_high, PPO's gradient is 0
    and AEPO's is −(1 + ε_high)·A·∇logπ; the low side and dual clip are PPO's, and the forward value equals
    PPO's everywhere. Deviation (as the released code): applied to every token, not only high-entropy ones
    (it only bites where ρ > 1 + ε_high and A > 0). The paper's entropy-aware advantage is
    `entropy_aware_advantages`, applied by the learner (`trainer.entropy_advantage_alpha`).
    """
    ratio_B_T = importance_ratio(logprobs_B_T, old_logprobs_B_T)
    upper_B_T = (1.0 + clip_high) * ratio_B_T / ratio_B_T.detach()
    return clipped_surrogate(ratio_B_T, advantages_B_T, clip_low, upper_B_T, dual_clip)


@register_loss("gspo", off_policy_only=True)
def gspo_loss(
    logprobs_B_T: Tensor,
    old_logprobs_B_T: Tensor,
    advantages_B_T: Tensor,
    *,
    clip_low: float,
    clip_high: float,
    dual_clip: float,
    mask_B_T: Tensor | None = None,
    sequence_clip_low: float = 3e-4,
    sequence_clip_high: float = 4e-4,
) -> tuple[Tensor, dict[str, Tensor]]:
    """GSPO: the clipped surrogate on the sequence-level ratio s_i = exp(mean_t log ρ_{i,t}) over `mask_B_T`.

    Zheng et al. 2025, "Group Sequence Policy Optimization" (arXiv 2507.18071). Written in the paper's
    GSPO-token form s_{i,t} = sg(s_i)·π_t / sg(π_t) (value s_i, gradient s_i·∇logπ_t), so the loss stays per
    token; with per-sequence advantages and `loss_agg = seq-mean-token-mean` its gradient is exactly GSPO's
    (1/G)·Σ_i s_i·A_i·(1/|y_i|)·Σ_t ∇logπ_{i,t}, with `token-mean` each sequence weighs by its length.
    The clip acts on s_i with the paper's ranges `sequence_clip_low` / `sequence_clip_high` (3e-4 / 4e-4,
    `trainer.sequence_clip_*`); the token-level `clip_low` / `clip_high` and `dual_clip` are not used (the paper
    has no dual clip). Deviation: the sequence log-ratio is clamped to ±20 (verl: ≤ 10) so exp cannot overflow.
    """
    if mask_B_T is None:
        mask_B_T = torch.ones_like(logprobs_B_T, dtype=torch.bool)
    mask_B_T = mask_B_T.bool()
    log_ratio_B_T = torch.where(mask_B_T, logprobs_B_T - old_logprobs_B_T, 0.0)
    seq_log_ratio_B = log_ratio_B_T.sum(-1) / mask_B_T.sum(-1).clamp(min=1)
    seq_log_ratio_B = seq_log_ratio_B.clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO)
    token_log_ratio_B_T = seq_log_ratio_B.detach()[:, None] + logprobs_B_T - logprobs_B_T.detach()
    ratio_B_T = torch.exp(token_log_ratio_B_T)
    return clipped_surrogate(ratio_B_T, advantages_B_T, sequence_clip_low, 1.0 + sequence_clip_high, 0.0)


@register_loss("cispo", off_policy_only=True)
def cispo_loss(
    logprobs_B_T: Tensor,
    old_logprobs_B_T: Tensor,
    advantages_B_T: Tensor,
    *,
    clip_low: float,
    clip_high: float,
    dual_clip: float,
    mask_B_T: Tensor | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """CISPO: REINFORCE on every token, weighted by the clipped, detached IS weight sg(clip(ρ, 1 − ε_low, 1 + ε_high)).

    MiniMax 2025, "MiniMax-M1: Scaling Test-Time Compute Efficiently with Lightning Attention" (arXiv 2506.13585):
    J = Σ_i Σ_t sg(r̂_{i,t})·A_{i,t}·log π_θ(o_{i,t}) / Σ_i |o_i|. Unlike PPO's clip, no token loses its gradient;
    a token with ρ > 1 + ε_high keeps gradient −(1 + ε_high)·A·∇logπ. Deviations: the per-token value is
    −sg(r̂)·A·π_θ/sg(π_θ) (value −r̂·A, the same gradient as the paper's −sg(r̂)·A·log π_θ) so the logged loss reads
    like the other losses'; the lower bound is `clip_low` (the paper sets no lower bound: `trainer.clip_low=1`
    matches it); `dual_clip` is not used. `clip_frac_low` / `clip_frac_high` mark where the weight was capped (the
    gradient is kept). The paper aggregates over all tokens: `loss_agg = token-mean`.
    """
    ratio_B_T = importance_ratio(logprobs_B_T, old_logprobs_B_T).detach()
    weight_B_T = ratio_B_T.clamp(min=1.0 - clip_low, max=1.0 + clip_high)
    loss_B_T = -advantages_B_T * weight_B_T * torch.exp(logprobs_B_T - logprobs_B_T.detach())
    zeros_B_T = torch.zeros_like(loss_B_T)
    stats = {
        "clip_frac_low": (ratio_B_T < 1.0 - clip_low).to(loss_B_T.dtype),
        "clip_frac_high": (ratio_B_T > 1.0 + clip_high).to(loss_B_T.dtype),
        "clip_frac_dual": zeros_B_T,
        "ratio": ratio_B_T,
    }
    return loss_B_T, stats


register_loss("clip_cov")(clip_cov_loss)
register_loss("kl_cov", off_policy_only=True)(kl_cov_loss)


def entropy_aware_advantages(
    advantages_B_T: Tensor, entropy_B_T: Tensor, mask_B_T: Tensor, alpha: float, *, eps: float = 1e-6
) -> Tensor:
    """AEPO entropy-aware advantage A_t·(1 + α·sg(z_t)), z_t = (H_t − mean H) / std H over the valid tokens.

    Dong et al. 2025 (AEPO, arXiv 2510.14545), α = 0.2 in the code. Statistics come from `mask_B_T` tokens only
    of whatever batch the caller passes; the learner passes a whole mini-batch so the result does not depend on
    micro-batch packing. Deviations from the AEPO code (per-micro-batch statistics, the sample std, replaced by 1
    when it is 0): the population std, with `eps` added to it.
    """
    mask_B_T = mask_B_T.bool()
    entropy_B_T = entropy_B_T.detach()
    count = mask_B_T.sum().clamp(min=1)
    mean = torch.where(mask_B_T, entropy_B_T, 0.0).sum() / count
    std = (torch.where(mask_B_T, (entropy_B_T - mean).square(), 0.0).sum() / count).sqrt()
    z_B_T = torch.where(mask_B_T, (entropy_B_T - mean) / (std + eps), 0.0)
    return advantages_B_T * (1.0 + alpha * z_B_T)


def entropy_from_logits(logits_B_T_V: Tensor) -> Tensor:
    """Entropy of the softmax distribution at each position: logsumexp(z) − Σ softmax(z)·z, in ≥ float32."""
    logits_B_T_V = _upcast(logits_B_T_V)
    probs_B_T_V = torch.softmax(logits_B_T_V, dim=-1)
    return torch.logsumexp(logits_B_T_V, dim=-1) - (probs_B_T_V * logits_B_T_V).sum(-1)


def token_logprobs(logits_B_T_V: Tensor, targets_B_T: Tensor) -> Tensor:
    """log softmax(logits)[target] per position, as gathered logit − logsumexp, in ≥ float32.

    Gathering first and subtracting the logsumexp avoids materialising a second B×T×V log-softmax tensor.
    """
    logits_B_T_V = _upcast(logits_B_T_V)
    target_logits_B_T = logits_B_T_V.gather(-1, targets_B_T.unsqueeze(-1)).squeeze(-1)
    return target_logits_B_T - torch.logsumexp(logits_B_T_V, dim=-1)


def _upcast(logits_B_T_V: Tensor) -> Tensor:
    # bf16/fp16 logsumexp over a large vocabulary loses the precision that ratios near 1 depend on.
    return logits_B_T_V if logits_B_T_V.dtype in (torch.float32, torch.float64) else logits_B_T_V.float()
