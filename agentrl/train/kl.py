"""Per-token estimators of KL(π ‖ π_ref) (`trainer.kl_estimator`) and the KL penalty as a reward
(`trainer.kl_in_reward`).

All three estimators are Schulman 2020, "Approximating KL Divergence" (http://joschu.net/blog/kl-approx.html),
for a token sampled from π, with δ = log π_ref − log π:

- `k1` = −δ: unbiased, high variance, negative on some tokens;
- `k2` = δ²/2: biased, low variance, ≥ 0;
- `k3` = e^δ − δ − 1: unbiased, low variance, ≥ 0 (verl's `low_var_kl`).

As a loss term (`kl_in_reward = False`), what matters is the gradient of the estimate with the samples held
fixed: E_π[∇k1] = E_π[∇log π] = 0, so `k1` pulls nothing in expectation; E_π[∇k2] = E_π[(log π − log π_ref)·∇log π]
= ∇KL(π ‖ π_ref); E_π[∇k3] = E_π[(1 − π_ref/π)·∇log π] = ∇KL(π_ref ‖ π) (the forward KL). As a reward only the
value matters, and `k1` is the classic choice (InstructGPT).
"""

from __future__ import annotations

import torch
from torch import Tensor

from agentrl.errors import ConfigError
from agentrl.train.surrogate import MAX_LOG_RATIO

KL_ESTIMATORS = ("k1", "k2", "k3")

# One far-off token must not dominate the penalty (verl clamps k3 the same way); a deviation: it biases huge KLs down.
_MAX_KL = 10.0


def kl_estimate(estimator: str, logprobs_B_T: Tensor, ref_logprobs_B_T: Tensor) -> Tensor:
    """The `estimator`'s estimate of KL(π ‖ π_ref) per token; δ is clamped to ±20 and the result to ±10."""
    delta_B_T = (ref_logprobs_B_T - logprobs_B_T).clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO)
    if estimator == "k1":
        kl_B_T = -delta_B_T
    elif estimator == "k2":
        kl_B_T = 0.5 * delta_B_T.square()
    elif estimator == "k3":
        kl_B_T = torch.exp(delta_B_T) - delta_B_T - 1.0
    else:
        raise ConfigError(f"unknown trainer.kl_estimator {estimator!r}; known: {', '.join(KL_ESTIMATORS)}")
    return kl_B_T.clamp(-_MAX_KL, _MAX_KL)


def kl_k3(logprobs_B_T: Tensor, ref_logprobs_B_T: Tensor) -> Tensor:
    """k3 = e^δ − δ − 1 with δ = ref − logp: unbiased, always ≥ 0 (see the module docstring)."""
    return kl_estimate("k3", logprobs_B_T, ref_logprobs_B_T)


def kl_penalty_to_go(kl_B_T: Tensor, mask_B_T: Tensor) -> Tensor:
    """Σ_{s ≥ t} m_s·kl_s along each row, detached: the KL penalties a token's return collects from itself on.

    With the per-token reward r_t = −β·kl_t (+ the outcome at the end) and γ = 1, the return of token t holds
    −β·Σ_{s ≥ t} kl_s: REINFORCE++ (Hu 2025) and InstructGPT (Ouyang et al. 2022) put the KL penalty there.
    Rows are whole trajectories, so the sum runs across turns; masked (prompt, tool-output) tokens add nothing.
    """
    masked_B_T = torch.where(mask_B_T.bool(), kl_B_T.detach(), 0.0)
    return masked_B_T.flip(-1).cumsum(-1).flip(-1)
