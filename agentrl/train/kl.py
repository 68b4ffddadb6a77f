"""Per-token estimators of KL(π ‖ π_ref), registered by name in `KL_ESTIMATORS` (`trainer.kl_estimator`), and the
KL penalty as a reward (`trainer.kl_in_reward`).

All three estimators are Schulman 2020, "Approximating KL Divergence" (http://joschu.net/blog/kl-approx.html),
for a token sampled from π, with δ = log π_ref − log π:

- `k1` = −δ: unbiased, high variance, negative on some tokens;
- `k2` = δ²/2: biased, low variance, ≥ 0;
- `k3` = e^δ − δ − 1: unbiased, low variance, ≥ 0 (verl's `low_var_kl`).

As a loss term (`kl_in_reward = False`), what matters is the gradient of the estimate with the samples held
fixed: E_π[∇k1] = E_π[∇log π] = 0, so `k1` pulls nothing in expectation; E_π[∇k2] = E_π[(log π − log π_ref)·∇log π]
= ∇KL(π ‖ π_ref); E_π[∇k3] = E_π[(1 − π_ref/π)·∇log π] = ∇KL(π_ref ‖ π) (the forward KL). As a reward only the
value matters, and `k1` is the classic choice (InstructGPT).

Deviations: δ is clamped to ±20 before use and every estimate to ±10 (verl clamps `low_var_kl` alone to ±10), so
one far-off token cannot dominate the penalty; this biases huge KLs down.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from agentrl.errors import ConfigError
from agentrl.train.surrogate import MAX_LOG_RATIO

KLEstimatorFn = Callable[[Tensor], Tensor]
"""δ_B_T = log π_ref − log π (clamped) → the per-token estimate of KL(π ‖ π_ref)."""

_MAX_KL = 10.0


def k1(delta_B_T: Tensor) -> Tensor:
    """k1 = −δ = log π − log π_ref (Schulman 2020)."""
    return -delta_B_T


def k2(delta_B_T: Tensor) -> Tensor:
    """k2 = δ²/2 (Schulman 2020)."""
    return 0.5 * delta_B_T.square()


def k3(delta_B_T: Tensor) -> Tensor:
    """k3 = e^δ − δ − 1 = (r − 1) − log r with r = π_ref / π (Schulman 2020)."""
    return torch.exp(delta_B_T) - delta_B_T - 1.0


KL_ESTIMATORS: dict[str, KLEstimatorFn] = {"k1": k1, "k2": k2, "k3": k3}


def kl_estimate(estimator: str, logprobs_B_T: Tensor, ref_logprobs_B_T: Tensor) -> Tensor:
    """The `KL_ESTIMATORS` entry `estimator`'s estimate of KL(π ‖ π_ref) per token; δ is clamped to ±20 and the
    result to ±10."""
    if estimator not in KL_ESTIMATORS:
        raise ConfigError(f"unknown trainer.kl_estimator {estimator!r}; known: {', '.join(KL_ESTIMATORS)}")
    delta_B_T = (ref_logprobs_B_T - logprobs_B_T).clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO)
    return KL_ESTIMATORS[estimator](delta_B_T).clamp(-_MAX_KL, _MAX_KL)


def kl_k3(logprobs_B_T: Tensor, ref_logprobs_B_T: Tensor) -> Tensor:
    """k3 = e^δ − δ − 1 with δ = ref − logp: unbiased, always ≥ 0 (`kl_estimate` with `k3`)."""
    return kl_estimate("k3", logprobs_B_T, ref_logprobs_B_T)


def kl_penalty_to_go(kl_B_T: Tensor, mask_B_T: Tensor) -> Tensor:
    """Σ_{s ≥ t} m_s·kl_s along each row, detached: the KL penalties a token's return collects from itself on.

    With the per-token reward r_t = −β·kl_t (+ the outcome at the end) and γ = 1, the return of token t holds
    −β·Σ_{s ≥ t} kl_s: REINFORCE++ (Hu 2025, arXiv 2501.03262) and InstructGPT (Ouyang et al. 2022) put the KL
    penalty there. Rows are whole trajectories, so the sum runs across turns; masked (prompt, tool-output) tokens
    add nothing. Deviation: the objective subtracts β times this from the advantage after credit assignment and
    normalisation, so, unlike REINFORCE++ (which normalises returns that already hold the penalty), it is not
    rescaled by the batch or group std, and with a group baseline it is not centred.
    """
    masked_B_T = torch.where(mask_B_T.bool(), kl_B_T.detach(), 0.0)
    return masked_B_T.flip(-1).cumsum(-1).flip(-1)
