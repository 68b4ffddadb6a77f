"""The loss properties of algorithms.md §8's checklist, asserted with hypothesis: every clip variant, GSPO, the
importance weights of every `tis_mode`, loss aggregation and AEPO's entropy scores (the advantage and credit
properties are in `test_credit_properties.py`)."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentrl.train.aggregation import aggregate
from agentrl.train.importance import TIS_MODES, importance_weights
from agentrl.train.losses import (
    OFF_POLICY_LOSSES,
    POLICY_LOSSES,
    aepo_loss,
    entropy_aware_advantages,
    gspo_loss,
    ppo_clip_loss,
)

pytestmark = pytest.mark.unit

FAST = settings(max_examples=20, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

# ppo_clip and every loss the learner refuses with one optimizer step per batch: at ρ ≡ 1 all of them are the plain
# policy gradient, which is why that refusal is right.
RATIO_ONE_LOSSES = sorted(OFF_POLICY_LOSSES | {"ppo_clip"})
CLIP = {"clip_low": 0.2, "clip_high": 0.28, "dual_clip": 3.0}
FLOATS = st.floats(-3, 3, allow_nan=False)


def _loss_and_grad(fn, logp, old, adv, **kw):
    logp = torch.tensor(logp, dtype=torch.float64, requires_grad=True)
    loss, _ = fn(logp, torch.tensor(old, dtype=torch.float64), torch.tensor(adv, dtype=torch.float64), **kw)
    loss.sum().backward()
    return loss.detach(), logp.grad


@FAST
@given(st.lists(st.tuples(FLOATS, FLOATS), min_size=1, max_size=6))
def test_ratio_one_makes_every_clip_variant_plain_policy_gradient(rows):
    logp = [[x for x, _ in rows]]
    adv = [[a for _, a in rows]]
    assert {"aepo", "gspo", "cispo", "kl_cov"} <= OFF_POLICY_LOSSES and "clip_cov" not in OFF_POLICY_LOSSES
    for name in RATIO_ONE_LOSSES:
        loss, grad = _loss_and_grad(POLICY_LOSSES[name], logp, logp, adv, **CLIP)
        torch.testing.assert_close(loss, -torch.tensor(adv, dtype=torch.float64), msg=name)
        torch.testing.assert_close(grad, -torch.tensor(adv, dtype=torch.float64), msg=name)


@FAST
@given(st.lists(st.tuples(st.floats(-1.5, 1.5), FLOATS), min_size=1, max_size=8))
def test_aepo_forward_equals_ppo_and_keeps_a_capped_gradient_above_the_clip(rows):
    log_ratio = [[r for r, _ in rows]]
    adv = [[a for _, a in rows]]
    zeros = [[0.0] * len(rows)]
    old = [[-r for r in log_ratio[0]]]
    ppo, ppo_grad = _loss_and_grad(ppo_clip_loss, zeros, old, adv, **CLIP)
    aepo, aepo_grad = _loss_and_grad(aepo_loss, zeros, old, adv, **CLIP)
    torch.testing.assert_close(aepo, ppo)
    ratio = torch.exp(torch.tensor(log_ratio, dtype=torch.float64))
    a = torch.tensor(adv, dtype=torch.float64)
    above = (ratio > 1.28) & (a > 0)
    torch.testing.assert_close(aepo_grad[above], -1.28 * a[above])
    torch.testing.assert_close(aepo_grad[~above], ppo_grad[~above])
    assert torch.equal(ppo_grad[above], torch.zeros_like(ppo_grad[above]))


@FAST
@given(st.lists(st.tuples(st.floats(-5, 5), st.floats(-3, -0.01)), min_size=1, max_size=8))
def test_dual_clip_bounds_negative_advantage_loss_by_c_abs_a(rows):
    zeros = [[0.0] * len(rows)]
    old = [[-r for r, _ in rows]]
    adv = torch.tensor([[a for _, a in rows]], dtype=torch.float64)
    for fn in (ppo_clip_loss, aepo_loss):
        loss, _ = _loss_and_grad(fn, zeros, old, adv.tolist(), **CLIP)
        assert bool((loss <= 3.0 * adv.abs() + 1e-9).all())


@FAST
@given(FLOATS, st.floats(-1, 1), st.floats(1e-3, 0.5))
def test_gspo_with_one_token_equals_ppo(adv, log_ratio, eps):
    kw = {"clip_low": eps, "clip_high": eps, "dual_clip": 0.0}
    sequence_kw = {"clip_low": 0.2, "clip_high": 0.28, "dual_clip": 3.0, "sequence_clip_low": eps}
    gspo = _loss_and_grad(gspo_loss, [[0.0]], [[-log_ratio]], [[adv]], **sequence_kw, sequence_clip_high=eps)
    ppo = _loss_and_grad(ppo_clip_loss, [[0.0]], [[-log_ratio]], [[adv]], **kw)
    torch.testing.assert_close(gspo, ppo)


@FAST
@given(
    st.lists(st.lists(st.tuples(st.floats(-3, 3), st.booleans()), min_size=1, max_size=6), min_size=1, max_size=4),
    st.floats(1.0, 3.0),
    st.sampled_from(sorted(TIS_MODES)),
    st.sampled_from([0.0, 0.5]),
)
def test_importance_weights_are_bounded_one_when_the_sampler_agrees_and_per_sequence_constant(rows, cap, mode, floor):
    width = max(len(r) for r in rows)
    log_ratio = torch.tensor([[x for x, _ in r] + [0.0] * (width - len(r)) for r in rows], dtype=torch.float64)
    mask = torch.tensor([[m for _, m in r] + [False] * (width - len(r)) for r in rows])
    sampler = torch.full_like(log_ratio, -2.0)
    weights, over = importance_weights(mode, sampler + log_ratio, sampler, mask, cap, floor)
    assert bool(((weights >= 0) & (weights <= cap)).all())
    assert bool(((over == 0) | (over == 1)).all())
    if mode.endswith("_mask"):  # dropped exactly where outside [floor, cap]; what is kept lies inside
        assert torch.equal(weights[over == 1], torch.zeros_like(weights[over == 1]))
        assert bool((weights[(over == 0) & mask] >= floor).all())
    else:  # truncated to exactly the cap there; no floor
        torch.testing.assert_close(weights[over == 1], torch.full_like(weights[over == 1], cap))
    if mode.startswith("sequence"):
        for b in range(len(rows)):
            assert len(set(weights[b][mask[b]].tolist())) <= 1
    agreeing = importance_weights(mode, sampler, sampler, mask, cap)[0]
    torch.testing.assert_close(agreeing, torch.ones_like(agreeing))


MASKED = st.lists(st.tuples(FLOATS, st.booleans()), min_size=1, max_size=6)


@FAST
@given(
    st.lists(MASKED, min_size=1, max_size=4),
    st.sampled_from(["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"]),
    st.data(),
)
def test_aggregation_is_invariant_to_padding_and_packing_and_ignores_masked_tokens(rows, mode, data):
    totals = {
        "num_sequences": sum(1 for r in rows if any(m for _, m in r)),
        "num_tokens": sum(m for r in rows for _, m in r),
        "norm_tokens": max(len(r) for r in rows),
    }

    def batch(part, width, junk):
        values = [[v for v, _ in r] + [junk] * (width - len(r)) for r in part]
        mask = [[m for _, m in r] + [False] * (width - len(r)) for r in part]
        # masked positions hold junk, even non-finite values, and must not matter
        values = [[v if m else junk for v, m in zip(vs, ms, strict=True)] for vs, ms in zip(values, mask, strict=True)]
        return torch.tensor(values, dtype=torch.float64, requires_grad=True), torch.tensor(mask)

    whole_values, whole_mask = batch(rows, max(len(r) for r in rows), 0.0)
    whole = aggregate(whole_values, whole_mask, mode, **totals)
    whole.backward()
    assert torch.equal(whole_values.grad[~whole_mask], torch.zeros(int((~whole_mask).sum()), dtype=torch.float64))
    cut = data.draw(st.integers(0, len(rows)))
    packed = 0.0
    for part in (rows[:cut], rows[cut:]):
        if part:
            values, mask = batch(part, max(len(r) for r in part) + data.draw(st.integers(0, 3)), math.inf)
            packed += float(aggregate(values, mask, mode, **totals).detach())
    assert packed == pytest.approx(float(whole.detach()), abs=1e-9)


@FAST
@given(MASKED, st.floats(0.05, 0.5))
def test_aepo_entropy_scores_use_valid_tokens_only(rows, alpha):
    advantages = torch.tensor([[1.0] * len(rows)], dtype=torch.float64)
    entropy = torch.tensor([[v for v, _ in rows]], dtype=torch.float64).abs()
    mask = torch.tensor([[m for _, m in rows]])
    scaled = entropy_aware_advantages(advantages, entropy, mask, alpha)
    junk = torch.where(mask, entropy, 123.0)
    torch.testing.assert_close(entropy_aware_advantages(advantages, junk, mask, alpha)[mask], scaled[mask])
    if mask.sum() > 0:
        z = (scaled[mask] - 1.0) / alpha  # the z-scores over the valid tokens: mean 0
        assert float(z.mean()) == pytest.approx(0.0, abs=1e-6)
