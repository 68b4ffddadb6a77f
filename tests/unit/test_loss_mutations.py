"""Every registered policy loss and every aggregation against numbers worked by hand from its paper's definition,
and the mutation matrix: with any registered loss (aggregation) put in another's place, that one's check fails.

The checks are plain functions that look the implementation up in the registry at call time
(`POLICY_LOSSES[name]`, `AGGREGATIONS[mode]`) and raise AssertionError on a wrong value, so the meta-tests can swap
registry entries and run them. Settings shared by the token-level checks: ε_low = 0.2, ε_high = 0.28, dual clip
c = 3, so 1 − ε_low = 0.8 and 1 + ε_high = 1.28. "grad" is d loss_t / d log π_t; for −A·ρ it is −A·ρ.
"""

from __future__ import annotations

import inspect
import math

import pytest
import torch

from agentrl.train.aggregation import AGGREGATIONS, aggregate
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


# --- the tests -------------------------------------------------------------------------------------------------


def test_every_registered_loss_and_aggregation_has_a_hand_computed_check():
    assert set(LOSS_CHECKS) == set(POLICY_LOSSES)
    assert set(AGGREGATION_CHECKS) == set(AGGREGATIONS)


@pytest.mark.parametrize("name", sorted(LOSS_CHECKS))
def test_loss_matches_its_hand_computed_values(name):
    LOSS_CHECKS[name]()


@pytest.mark.parametrize("mode", sorted(AGGREGATION_CHECKS))
def test_aggregation_matches_its_hand_computed_value(mode):
    AGGREGATION_CHECKS[mode]()


def _fails(check) -> bool:
    try:
        check()
    except AssertionError:
        return True
    return False


@pytest.mark.parametrize("name", sorted(LOSS_CHECKS))
def test_any_other_loss_in_its_place_fails_its_check(name, monkeypatch):
    survivors = []
    for other in sorted(set(POLICY_LOSSES) - {name}):
        with monkeypatch.context() as patch:
            patch.setitem(POLICY_LOSSES, name, POLICY_LOSSES[other])
            if not _fails(LOSS_CHECKS[name]):
                survivors.append(other)
    assert not survivors, f"{survivors} pass the check of {name}"
    LOSS_CHECKS[name]()  # the registry is restored


@pytest.mark.parametrize("mode", sorted(AGGREGATION_CHECKS))
def test_any_other_aggregation_in_its_place_fails_its_check(mode, monkeypatch):
    survivors = []
    for other in sorted(set(AGGREGATIONS) - {mode}):
        with monkeypatch.context() as patch:
            patch.setitem(AGGREGATIONS, mode, AGGREGATIONS[other])
            if not _fails(AGGREGATION_CHECKS[mode]):
                survivors.append(other)
    assert not survivors, f"{survivors} pass the check of {mode}"
    AGGREGATION_CHECKS[mode]()
