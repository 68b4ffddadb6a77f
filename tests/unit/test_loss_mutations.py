"""Every registered policy loss, aggregation, KL estimator and TIS mode against numbers worked by hand from its
paper's definition, and the mutation matrix: with any registered implementation put in another's place in its
registry, that one's check fails.

The checks are plain functions that reach the implementation through its registry at call time
(`POLICY_LOSSES[name]`, `aggregate(…, mode)`, `kl_estimate(name, …)`, `importance_weights(mode, …)`) and raise
AssertionError on a wrong value, so the meta-tests can swap registry entries and run them. Settings shared by the
token-level loss checks: ε_low = 0.2, ε_high = 0.28, dual clip c = 3, so 1 − ε_low = 0.8 and 1 + ε_high = 1.28.
"grad" is d loss_t / d log π_t; for −A·ρ it is −A·ρ.
"""

from __future__ import annotations

import inspect
import math

import pytest
import torch

from agentrl.train.aggregation import AGGREGATIONS, aggregate
from agentrl.train.importance import TIS_MODES, importance_weights
from agentrl.train.kl import KL_ESTIMATORS, kl_estimate
from agentrl.train.losses import POLICY_LOSSES

pytestmark = pytest.mark.unit

CLIP = {"clip_low": 0.2, "clip_high": 0.28, "dual_clip": 3.0}


def t(values):
    return torch.tensor(values, dtype=torch.float64)


def run_loss(name, logprobs, log_ratios, advantages, mask=None, **options):
    """(loss, grad) of the registered loss `name`, with log π_old = log π − log ρ; like the learner, it passes
    only the options the loss declares."""
    fn = POLICY_LOSSES[name]
    declared = inspect.signature(fn).parameters
    logp = t(logprobs).requires_grad_()
    old = logp.detach() - t(log_ratios)
    mask_t = torch.ones_like(logp, dtype=torch.bool) if mask is None else torch.tensor(mask)
    kwargs = {k: v for k, v in options.items() if k in declared}
    loss, _ = fn(logp, old, t(advantages), **CLIP, mask_B_T=mask_t, **kwargs)
    torch.where(mask_t, loss, 0.0).sum().backward()
    return loss.detach(), logp.grad


def close(actual, expected, mask=None):
    expected = t(expected)
    if mask is not None:
        actual, expected = actual[torch.tensor(mask)], expected[torch.tensor(mask)]
    assert torch.allclose(actual, expected, atol=1e-4), (actual.tolist(), expected.tolist())


# Six tokens, one per clip case: (ρ, A) = (1.5, +1) (1.2, +1) (0.5, −1) (5, −1) (1.5, −1) (0.5, +1).
RATIOS = [[math.log(1.5), math.log(1.2), math.log(0.5), math.log(5.0), math.log(1.5), math.log(0.5)]]
ADVANTAGES = [[1.0, 1.0, -1.0, -1.0, -1.0, 1.0]]
LOGPROBS = [[-1.0] * 6]


# Four tokens for the covariance losses: log π = −1, −2, −3, −6 (mean −3), A = 3, 1, −1, −3 (mean 0), so
# Cov_t = (log π_t + 3)·A_t = 2·3, 1·1, 0·(−1), (−3)·(−3) = 6, 1, 0, 9.
COV_LOGPROBS = [[-1.0, -2.0, -3.0, -6.0]]
COV_ADVANTAGES = [[3.0, 1.0, -1.0, -3.0]]


def check_ppo_clip():
    """L = max(−Aρ, −A·clip(ρ, 0.8, 1.28)), then min(L, 3|A|) for A < 0 (Schulman et al. 2017; DAPO; dual clip).

    (1.5, +1): max(−1.5, −1.28) = −1.28, clipped → grad 0.   (1.2, +1): −1.2, grad −1.2.
    (0.5, −1): max(0.5, 0.8) = 0.8, clipped → grad 0.        (5, −1): max(5, 1.28) = 5 > 3 → 3, grad 0.
    (1.5, −1): max(1.5, 1.28) = 1.5 < 3, grad +1.5.         (0.5, +1): max(−0.5, −0.8) = −0.5, grad −0.5.
    At ρ = 1 every token is −A, whatever its log-prob: log π = −1, −2, −3, −6, A = 2, 1, −1, −2 → −2, −1, 1, 2
    (token 1's covariance (−1 + 3)·2 = 4 is one Clip-Cov would drop).
    """
    loss, grad = run_loss("ppo_clip", LOGPROBS, RATIOS, ADVANTAGES)
    close(loss, [[-1.28, -1.2, 0.8, 3.0, 1.5, -0.5]])
    close(grad, [[0.0, -1.2, 0.0, 0.0, 1.5, -0.5]])
    loss, grad = run_loss("ppo_clip", COV_LOGPROBS, [[0.0] * 4], [[2.0, 1.0, -1.0, -2.0]])
    close(loss, [[-2.0, -1.0, 1.0, 2.0]])
    close(grad, [[-2.0, -1.0, 1.0, 2.0]])


def check_aepo():
    """AEPO (Dong et al. 2025): PPO's values everywhere; where A > 0 and ρ > 1 + ε_high the gradient is kept at
    −(1 + ε_high)·A instead of 0: (1.5, +1) → loss −1.28, grad −1.28. The other five tokens are PPO's."""
    loss, grad = run_loss("aepo", LOGPROBS, RATIOS, ADVANTAGES)
    close(loss, [[-1.28, -1.2, 0.8, 3.0, 1.5, -0.5]])
    close(grad, [[-1.28, -1.2, 0.0, 0.0, 1.5, -0.5]])


def check_cispo():
    """CISPO (MiniMax-M1): −sg(clip(ρ, 0.8, 1.28))·A·log π, so value −w·A and grad −w·A on every token, no dual clip.

    w = 1.28, 1.2, 0.8, 1.28, 1.28, 0.8 → loss = grad = −1.28, −1.2, 0.8, 1.28, 1.28, −0.8.
    """
    loss, grad = run_loss("cispo", LOGPROBS, RATIOS, ADVANTAGES)
    close(loss, [[-1.28, -1.2, 0.8, 1.28, 1.28, -0.8]])
    close(grad, [[-1.28, -1.2, 0.8, 1.28, 1.28, -0.8]])


def check_gspo():
    """GSPO (Zheng et al. 2025) with sequence clip ε = 0.1: s_i = exp(mean of the row's masked log ρ), every token
    of row i gets max(−A·s_i, −A·clip(s_i, 0.9, 1.1)) with gradient −A·s_i when unclipped.

    row 0: log ρ = 0.1, 0.3 → s = e^0.2 = 1.2214 > 1.1, A = +1 → −1.1 on both tokens, grad 0.
    row 1: log ρ = 0.05, −0.05 (a masked 3.0 is ignored) → s = 1, A = −2 → 2, grad 2.
    row 2: log ρ = 0.02, 0.04 → s = e^0.03 = 1.030455, A = +1 → −1.030455, grad −1.030455.
    """
    mask = [[True, True, False], [True, True, False], [True, True, False]]
    loss, grad = run_loss(
        "gspo",
        [[-1.0] * 3] * 3,
        [[0.1, 0.3, 0.0], [0.05, -0.05, 3.0], [0.02, 0.04, 0.0]],
        [[1.0, 1.0, 0.0], [-2.0, -2.0, 0.0], [1.0, 1.0, 0.0]],
        mask,
        sequence_clip_low=0.1,
        sequence_clip_high=0.1,
    )
    s = math.exp(0.03)
    close(loss, [[-1.1, -1.1, 0], [2.0, 2.0, 0], [-s, -s, 0]], mask)
    close(grad, [[0.0, 0.0, 0], [2.0, 2.0, 0], [-s, -s, 0]], mask)


def check_clip_cov():
    """Clip-Cov (Cui et al. 2025): among the tokens the PPO clip did not cut whose Cov lies strictly inside the
    bounds, max(1, ⌊r·4⌋) are picked and their loss set to 0 (value and gradient); the rest is `ppo_clip`.

    Token 4 has ρ = 0.5, A = −3: max(1.5, 2.4) = 2.4, low-clipped, grad 0. Token 3: ρ = 1, A = −1 → 1, grad 1.
    - bounds (0.5, 8), r = 0.5: candidates tokens 1 (Cov 6) and 2 (Cov 1); 2 picks → both dropped.
    - bounds (0.5, 10), r = 0.75: token 4's Cov 9 is inside but the clip already cut it, so the candidates are
      still tokens 1 and 2; 3 picks → both dropped, token 4 keeps 2.4.
    Either way: loss 0, 0, 1, 2.4 and grad 0, 0, 1, 0.
    """
    for bounds, fraction in (((0.5, 8.0), 0.5), ((0.5, 10.0), 0.75)):
        loss, grad = run_loss(
            "clip_cov",
            COV_LOGPROBS,
            [[0.0, 0.0, 0.0, math.log(0.5)]],
            COV_ADVANTAGES,
            cov_token_fraction=fraction,
            clip_cov_bounds=bounds,
        )
        close(loss, [[0.0, 0.0, 1.0, 2.4]])
        close(grad, [[0.0, 0.0, 1.0, 0.0]])


def check_kl_cov():
    """KL-Cov (Cui et al. 2025), k = 0.25 → the ⌊0.25·4⌋ = 1 token of largest Cov (token 4, Cov 9) gets
    β·|log π − log π_old| with β = 0.5; no clip anywhere.

    token 1: ρ = 1, A = 3 → −3, grad −3.        token 2: ρ = e^0.5 = 1.648721, A = +1 → −1.648721 (unclipped).
    token 3: ρ = 1, A = −1 → 1, grad 1.         token 4: ρ = e^−0.2 = 0.818731, A = −3 → 3·0.818731 + 0.5·0.2 =
    2.556192, grad 3·0.818731 + 0.5·sign(−0.2) = 1.956192.
    """
    loss, grad = run_loss(
        "kl_cov",
        COV_LOGPROBS,
        [[0.0, 0.5, 0.0, -0.2]],
        COV_ADVANTAGES,
        cov_token_fraction=0.25,
        kl_cov_coef=0.5,
    )
    rho2, rho4 = math.exp(0.5), math.exp(-0.2)
    close(loss, [[-3.0, -rho2, 1.0, 3 * rho4 + 0.1]])
    close(grad, [[-3.0, -rho2, 1.0, 3 * rho4 - 0.5]])


LOSS_CHECKS = {
    "ppo_clip": check_ppo_clip,
    "aepo": check_aepo,
    "cispo": check_cispo,
    "gspo": check_gspo,
    "clip_cov": check_clip_cov,
    "kl_cov": check_kl_cov,
}

# --- aggregations ----------------------------------------------------------------------------------------------
# Row 0 has loss tokens 2, 3; row 1 has 5, 6, 7, 8: Σ = 31 over 6 tokens in 2 sequences; Dr. GRPO's constant is 10
# (not the width 4 of the batch, nor its 4 longest loss tokens).
AGG_LOSS = [[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]
AGG_MASK = [[False, True, True, False], [True, True, True, True]]


def _aggregate(mode):
    return aggregate(t(AGG_LOSS), torch.tensor(AGG_MASK), mode, num_sequences=2, num_tokens=6, norm_tokens=10).item()


def check_token_mean():
    """DAPO: Σ L / #tokens = 31 / 6."""
    assert _aggregate("token-mean") == pytest.approx(31 / 6)


def check_seq_mean_token_mean():
    """GRPO: mean over sequences of per-sequence means = ((2 + 3) / 2 + (5 + 6 + 7 + 8) / 4) / 2 = (2.5 + 6.5) / 2."""
    assert _aggregate("seq-mean-token-mean") == pytest.approx(4.5)


def check_seq_mean_token_sum():
    """Per-sequence sums, averaged: (5 + 26) / 2 = 15.5."""
    assert _aggregate("seq-mean-token-sum") == pytest.approx(15.5)


def check_seq_mean_token_sum_norm():
    """Dr. GRPO: (5 + 26) / (2 · MAX_TOKENS) = 31 / 20."""
    assert _aggregate("seq-mean-token-sum-norm") == pytest.approx(1.55)


AGGREGATION_CHECKS = {
    "token-mean": check_token_mean,
    "seq-mean-token-mean": check_seq_mean_token_mean,
    "seq-mean-token-sum": check_seq_mean_token_sum,
    "seq-mean-token-sum-norm": check_seq_mean_token_sum_norm,
}


# --- KL estimators ----------------------------------------------------------------------------------------------
# Pointwise, two sampled tokens: (log π, log π_ref) = (−1, −0.5) and (−0.5, −1.5), so δ = log π_ref − log π = 0.5, −1.
# In expectation, over a three-token vocabulary enumerated exactly: π = softmax(θ), π_ref = softmax(θ_ref), and the
# estimate's mean Σ_x sg(π(x))·k(x) (samples held fixed) against KL computed from its definition Σ p·log(p/q).
KL_LOGPROBS = [-1.0, -0.5]
KL_REF = [-0.5, -1.5]
THETA = [0.3, -0.2, 0.5]
THETA_REF = [0.0, 0.4, -0.3]


def _kl_pointwise(name):
    logprobs = t(KL_LOGPROBS).requires_grad_()
    value = kl_estimate(name, logprobs, t(KL_REF))
    value.sum().backward()
    return value.detach(), logprobs.grad


def _kl_in_expectation(name):
    """(Σ_x π·k, its gradient in θ, KL(π ‖ π_ref), ∇KL(π ‖ π_ref), ∇KL(π_ref ‖ π)), KLs from the definition."""

    def kl(p_logits, q_logits):
        p, q = torch.softmax(p_logits, -1), torch.softmax(q_logits, -1)
        return (p * (p.log() - q.log())).sum()

    theta = t(THETA).requires_grad_()
    logprobs = torch.log_softmax(theta, -1)
    mean = (torch.softmax(theta, -1).detach() * kl_estimate(name, logprobs, torch.log_softmax(t(THETA_REF), -1))).sum()
    (grad,) = torch.autograd.grad(mean, theta)
    forward = kl(theta, t(THETA_REF))
    (grad_forward,) = torch.autograd.grad(forward, theta)
    (grad_reverse,) = torch.autograd.grad(kl(t(THETA_REF), theta), theta)
    return mean.item(), grad, forward.item(), grad_forward, grad_reverse


def check_k1():
    """k1 = −δ (Schulman 2020): −0.5, 1; d/dlog π = 1 on both. Unbiased: Σ π·k1 = KL(π ‖ π_ref); its gradient
    with the samples fixed is Σ π·∇log π = 0."""
    value, grad = _kl_pointwise("k1")
    close(value, [-0.5, 1.0])
    close(grad, [1.0, 1.0])
    mean, grad, kl, _, _ = _kl_in_expectation("k1")
    assert mean == pytest.approx(kl)
    close(grad, [0.0, 0.0, 0.0])


def check_k2():
    """k2 = δ²/2 (Schulman 2020): 0.125, 0.5; d/dlog π = −δ = −0.5, 1. Biased: Σ π·k2 ≠ KL(π ‖ π_ref); its
    gradient with the samples fixed is ∇KL(π ‖ π_ref)."""
    value, grad = _kl_pointwise("k2")
    close(value, [0.125, 0.5])
    close(grad, [-0.5, 1.0])
    mean, grad, kl, grad_forward, _ = _kl_in_expectation("k2")
    assert mean != pytest.approx(kl, rel=1e-3)
    close(grad, grad_forward.tolist())


def check_k3():
    """k3 = e^δ − δ − 1 (Schulman 2020): e^0.5 − 1.5 = 0.148721, e^−1 = 0.367879; d/dlog π = 1 − e^δ =
    −0.648721, 0.632121. Unbiased: Σ π·k3 = KL(π ‖ π_ref); its gradient with the samples fixed is ∇KL(π_ref ‖ π)."""
    value, grad = _kl_pointwise("k3")
    close(value, [math.exp(0.5) - 1.5, math.exp(-1.0)])
    close(grad, [1.0 - math.exp(0.5), 1.0 - math.exp(-1.0)])
    mean, grad, kl, _, grad_reverse = _kl_in_expectation("k3")
    assert mean == pytest.approx(kl)
    close(grad, grad_reverse.tolist())


KL_CHECKS = {"k1": check_k1, "k2": check_k2, "k3": check_k3}

# --- TIS modes -------------------------------------------------------------------------------------------------
# log π_old − log π_sampler per token; the last column is masked (tool output) and must not count. Cap C = 2,
# floor F = 0.5 (the truncating modes have none). Sequence sums: 1.3 → e^1.3 = 3.669, 0.2 → 1.2214, −0.9 → 0.4066.
TIS_LOG_RATIOS = [[0.5, -0.2, 1.0, 7.0], [0.1, 0.2, -0.1, 5.0], [-1.0, 0.1, 0.0, -9.0]]
TIS_MASK = [[True, True, True, False]] * 3
E = math.exp


def _tis(mode):
    sampler = torch.full((3, 4), -1.0, dtype=torch.float64)
    weights, rejected = importance_weights(mode, sampler + t(TIS_LOG_RATIOS), sampler, torch.tensor(TIS_MASK), 2.0, 0.5)
    assert not weights.requires_grad
    return weights, rejected


def check_token_tis():
    """TIS (Yao et al. 2025): min(ρ_t, C); e^1 = 2.718 is truncated to 2, e^−1 = 0.368 kept."""
    weights, rejected = _tis("token")
    close(weights, [[E(0.5), E(-0.2), 2.0, 0], [E(0.1), E(0.2), E(-0.1), 0], [E(-1), E(0.1), 1.0, 0]], TIS_MASK)
    close(rejected, [[0, 0, 1, 0], [0, 0, 0, 0], [0, 0, 0, 0]], TIS_MASK)


def check_sequence_tis():
    """Sequence-level TIS (Yao et al. 2025): min(Π_t ρ_t, C) on the sequence: 2, e^0.2, e^−0.9."""
    weights, rejected = _tis("sequence")
    close(weights, [[2.0] * 4, [E(0.2)] * 4, [E(-0.9)] * 4], TIS_MASK)
    close(rejected, [[1] * 4, [0] * 4, [0] * 4], TIS_MASK)


def check_token_mis():
    """MIS / IcePop (Liu et al. 2025; Ring-1T): ρ_t inside [F, C], else 0: e^1 > 2 and e^−1 < 0.5 are dropped."""
    weights, rejected = _tis("token_mask")
    close(weights, [[E(0.5), E(-0.2), 0, 0], [E(0.1), E(0.2), E(-0.1), 0], [0, E(0.1), 1.0, 0]], TIS_MASK)
    close(rejected, [[0, 0, 1, 0], [0, 0, 0, 0], [1, 0, 0, 0]], TIS_MASK)


def check_sequence_mis():
    """Sequence-level MIS (Liu et al. 2025): Π_t ρ_t inside [F, C], else 0 for the whole sequence: 3.669 > 2 and
    0.4066 < 0.5 drop rows 0 and 2."""
    weights, rejected = _tis("sequence_mask")
    close(weights, [[0.0] * 4, [E(0.2)] * 4, [0.0] * 4], TIS_MASK)
    close(rejected, [[1] * 4, [0] * 4, [1] * 4], TIS_MASK)


TIS_CHECKS = {
    "token": check_token_tis,
    "sequence": check_sequence_tis,
    "token_mask": check_token_mis,
    "sequence_mask": check_sequence_mis,
}

# --- the matrix ------------------------------------------------------------------------------------------------

MATRIX = {
    "loss": (POLICY_LOSSES, LOSS_CHECKS),
    "aggregation": (AGGREGATIONS, AGGREGATION_CHECKS),
    "kl_estimator": (KL_ESTIMATORS, KL_CHECKS),
    "tis_mode": (TIS_MODES, TIS_CHECKS),
}
ENTRIES = [(kind, name) for kind, (_, checks) in MATRIX.items() for name in sorted(checks)]


@pytest.mark.parametrize("kind", sorted(MATRIX))
def test_every_registered_implementation_has_a_hand_computed_check(kind):
    registry, checks = MATRIX[kind]
    assert set(checks) == set(registry)


@pytest.mark.parametrize(("kind", "name"), ENTRIES)
def test_implementation_matches_its_hand_computed_values(kind, name):
    MATRIX[kind][1][name]()


def _fails(check) -> bool:
    try:
        check()
    except AssertionError:
        return True
    return False


@pytest.mark.parametrize(("kind", "name"), ENTRIES)
def test_any_other_implementation_in_its_place_fails_its_check(kind, name, monkeypatch):
    registry, checks = MATRIX[kind]
    survivors = []
    for other in sorted(set(registry) - {name}):
        with monkeypatch.context() as patch:
            patch.setitem(registry, name, registry[other])
            if not _fails(checks[name]):
                survivors.append(other)
    assert not survivors, f"{survivors} pass the check of {kind} {name}"
    checks[name]()  # the registry is restored
