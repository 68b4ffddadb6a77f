"""Policy-gradient losses and the token statistics around them, as pure tensor functions.

A policy loss maps per-token log-probabilities to a per-token loss and per-token statistics:

    fn(logprobs_B_T, old_logprobs_B_T, advantages_B_T, *, clip_low, clip_high, dual_clip, mask_B_T)
        -> (loss_B_T, stats: dict[str, Tensor of shape B_T])

and is registered by name in `POLICY_LOSSES` (`trainer.loss = "ppo_clip"`, `"aepo"`, `"gspo"`). `aggregate`
reduces a per-token quantity over the loss mask in one of three modes (`trainer.loss_agg`); its denominators
are passed in as totals over the whole mini-batch, so summing `aggregate` over the micro-batches of a
mini-batch gives exactly the mini-batch value and gradient accumulation needs no rescaling. `kl_k3`,
`entropy_from_logits` and `token_logprobs` are the remaining per-token pieces of the objective (algorithms.md
§2.1); `truncated_importance_weights` (TIS) reweights the per-token policy loss and `entropy_aware_advantages`
(AEPO) rescales the advantages before it:

    loss = agg(L_clip) + kl_coef · agg(KL_k3(π_θ ‖ π_ref)) − entropy_coef · agg(H(π_θ))
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from agentrl.errors import ConfigError

PolicyLossFn = Callable[..., tuple[Tensor, dict[str, Tensor]]]

POLICY_LOSSES: dict[str, PolicyLossFn] = {}

AGGREGATION_MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm")

# exp() of a log-ratio beyond this overflows float32 long before it means anything; verl clamps the same way.
_MAX_LOG_RATIO = 20.0


def register_loss(name: str) -> Callable[[PolicyLossFn], PolicyLossFn]:
    """Register a policy loss under `name` (the value of `trainer.loss`)."""

    def decorator(fn: PolicyLossFn) -> PolicyLossFn:
        if name in POLICY_LOSSES:
            raise ValueError(f"policy loss {name!r} is already registered")
        POLICY_LOSSES[name] = fn
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
    ratio_B_T = torch.exp((logprobs_B_T - old_logprobs_B_T).clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO))
    return clipped_surrogate(ratio_B_T, advantages_B_T, clip_low, 1.0 + clip_high, dual_clip)


@register_loss("aepo")
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
    ratio_B_T = torch.exp((logprobs_B_T - old_logprobs_B_T).clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO))
    upper_B_T = (1.0 + clip_high) * ratio_B_T / ratio_B_T.detach()
    return clipped_surrogate(ratio_B_T, advantages_B_T, clip_low, upper_B_T, dual_clip)


@register_loss("gspo")
def gspo_loss(
    logprobs_B_T: Tensor,
    old_logprobs_B_T: Tensor,
    advantages_B_T: Tensor,
    *,
    clip_low: float,
    clip_high: float,
    dual_clip: float,
    mask_B_T: Tensor | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """GSPO: the clipped surrogate on the sequence-level ratio s_i = exp(mean_t log ρ_{i,t}) over `mask_B_T`.

    Zheng et al. 2025, "Group Sequence Policy Optimization" (arXiv 2507.18071). Written in the paper's
    GSPO-token form s_{i,t} = sg(s_i)·π_t / sg(π_t) (value s_i, gradient s_i·∇logπ_t), so the loss stays per
    token; with per-sequence advantages and `loss_agg = seq-mean-token-mean` its gradient is exactly GSPO's
    (1/G)·Σ_i s_i·A_i·(1/|y_i|)·Σ_t ∇logπ_{i,t}, with `token-mean` each sequence weighs by its length.
    The clip acts on s_i: the paper uses ε of order 3e-4 / 4e-4, so set `trainer.clip_low` / `clip_high`
    accordingly (the defaults are token-level PPO's). Deviation: no dual clip (`dual_clip` is ignored).
    """
    if mask_B_T is None:
        mask_B_T = torch.ones_like(logprobs_B_T, dtype=torch.bool)
    mask_B_T = mask_B_T.bool()
    log_ratio_B_T = torch.where(mask_B_T, logprobs_B_T - old_logprobs_B_T, 0.0)
    seq_log_ratio_B = log_ratio_B_T.sum(-1) / mask_B_T.sum(-1).clamp(min=1)
    seq_log_ratio_B = seq_log_ratio_B.clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO)
    token_log_ratio_B_T = seq_log_ratio_B.detach()[:, None] + logprobs_B_T - logprobs_B_T.detach()
    return clipped_surrogate(torch.exp(token_log_ratio_B_T), advantages_B_T, clip_low, 1.0 + clip_high, 0.0)


def clipped_surrogate(
    ratio_B_T: Tensor, advantages_B_T: Tensor, clip_low: float, upper: float | Tensor, dual_clip: float
) -> tuple[Tensor, dict[str, Tensor]]:
    """max(−A·ρ, −A·clip(ρ, 1 − ε_low, upper)), then the dual clip min(·, −A·c) for A < 0, with stats.

    `upper` may be a tensor (AEPO's gradient-carrying bound); the clamp is a `where`, so a clamped token's
    gradient is the bound's.
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


def truncated_importance_weights(old_logprobs_B_T: Tensor, sampler_logprobs_B_T: Tensor, cap: float) -> Tensor:
    """TIS weights min(π_old / π_sampler, cap) per token, detached.

    Yao et al. 2025, "Your Efficient RL Framework Secretly Brings You Off-Policy RL Training" (truncated
    importance sampling): the sampler (vLLM, quantised or stale weights) and the learner disagree on token
    probabilities; weighting each token's policy loss by this capped ratio corrects the mismatch with bounded
    variance. The log-ratio is clamped to ±20 before exp.
    """
    log_ratio_B_T = (old_logprobs_B_T - sampler_logprobs_B_T).detach().clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO)
    return torch.exp(log_ratio_B_T).clamp(max=cap)


def entropy_aware_advantages(
    advantages_B_T: Tensor, entropy_B_T: Tensor, mask_B_T: Tensor, alpha: float, *, eps: float = 1e-6
) -> Tensor:
    """AEPO entropy-aware advantage A_t·(1 + α·sg(z_t)), z_t = (H_t − mean H) / std H over the valid tokens.

    Dong et al. 2025 (AEPO, arXiv 2510.14545), α = 0.2 in the code. Statistics come from `mask_B_T` tokens only
    (population std, eps-guarded) of whatever batch the caller passes; the learner passes a whole mini-batch
    so the result does not depend on micro-batch packing (the AEPO code uses per-micro-batch statistics).
    """
    mask_B_T = mask_B_T.bool()
    entropy_B_T = entropy_B_T.detach()
    count = mask_B_T.sum().clamp(min=1)
    mean = torch.where(mask_B_T, entropy_B_T, 0.0).sum() / count
    std = (torch.where(mask_B_T, (entropy_B_T - mean).square(), 0.0).sum() / count).sqrt()
    z_B_T = torch.where(mask_B_T, (entropy_B_T - mean) / (std + eps), 0.0)
    return advantages_B_T * (1.0 + alpha * z_B_T)


def aggregate(
    loss_B_T: Tensor,
    mask_B_T: Tensor,
    mode: str,
    *,
    num_sequences: int,
    num_tokens: int,
    max_tokens: int,
) -> Tensor:
    """Reduce a per-token quantity over the loss mask to a scalar (verl `agg_loss`).

    `num_sequences`, `num_tokens` (loss tokens) and `max_tokens` are totals over the whole mini-batch, not
    over `loss_B_T`, so that summing this over the micro-batches of a mini-batch equals the mini-batch value.

    - `token-mean`: Σ L·m / num_tokens — every token weighs the same (DAPO, Yu et al. 2025).
    - `seq-mean-token-mean`: Σ_i (Σ_t L·m / |o_i|) / num_sequences — GRPO as written (Shao et al. 2024);
      rows without loss tokens add 0.
    - `seq-mean-token-sum-norm`: Σ L·m / (num_sequences · max_tokens) — Dr. GRPO's constant normaliser
      (Liu et al. 2025), which removes the length bias of per-sequence means.

    Masked positions are selected out with `where`, so a non-finite value there cannot leak into the result.
    """
    mask_B_T = mask_B_T.bool()
    masked_B_T = torch.where(mask_B_T, loss_B_T, torch.zeros_like(loss_B_T))
    if mode == "token-mean":
        return masked_B_T.sum() / max(num_tokens, 1)
    if mode == "seq-mean-token-mean":
        tokens_B = mask_B_T.sum(-1).clamp(min=1).to(loss_B_T.dtype)
        return (masked_B_T.sum(-1) / tokens_B).sum() / max(num_sequences, 1)
    if mode == "seq-mean-token-sum-norm":
        return masked_B_T.sum() / max(num_sequences * max_tokens, 1)
    raise ConfigError(f"unknown loss aggregation {mode!r}; known: {', '.join(AGGREGATION_MODES)}")


def kl_k3(logprobs_B_T: Tensor, ref_logprobs_B_T: Tensor) -> Tensor:
    """k3 estimator of KL(π ‖ π_ref) per token, for tokens sampled from π: exp(δ) − δ − 1 with δ = ref − logp.

    Schulman 2020, "Approximating KL Divergence" (http://joschu.net/blog/kl-approx.html): unbiased,
    always ≥ 0, lower variance than −δ. verl calls it `low_var_kl`; like verl, δ is clamped to ±20 and the
    result to [−10, 10] so one far-off token cannot dominate the penalty (a deviation: the clamp biases huge
    KLs down).
    """
    delta_B_T = (ref_logprobs_B_T - logprobs_B_T).clamp(-_MAX_LOG_RATIO, _MAX_LOG_RATIO)
    return (torch.exp(delta_B_T) - delta_B_T - 1.0).clamp(-10.0, 10.0)


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
