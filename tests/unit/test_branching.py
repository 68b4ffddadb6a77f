"""ARPO/AEPO branch probabilities and budget rules on fixed draws (reference/algorithms.md §3.1–3.2, §7.1)."""

import math
import random

import pytest

from agentrl.rollout.branching import (
    BranchRule,
    BranchState,
    aepo_forks,
    arpo_forks,
    fork_probability,
    initial_rollouts,
    segment_entropy,
)

pytestmark = pytest.mark.unit

_RNG = random.Random(7)
DRAWS = [_RNG.random() for _ in range(20000)]


def rate(test) -> float:
    return sum(test(u) for u in DRAWS) / len(DRAWS)


@pytest.mark.parametrize(("delta_h", "expected"), [(0.5, 0.60), (0.0, 0.50), (-0.5, 0.40)])
def test_arpo_branch_probability_worked_example(delta_h, expected):
    assert fork_probability("arpo", delta_h) == pytest.approx(expected)
    assert rate(lambda u: arpo_forks(u, delta_h)) == pytest.approx(expected, abs=0.01)


@pytest.mark.parametrize(("consecutive", "expected"), [(0, 0.50), (4, 0.375), (10, 0.0), (12, 0.0)])
def test_aepo_consecutive_penalty_worked_example(consecutive, expected):
    assert fork_probability("aepo", 0.0, consecutive) == pytest.approx(expected)
    assert rate(lambda u: aepo_forks(u, 0.0, consecutive)) == pytest.approx(expected, abs=0.01)


def test_fixed_draws_at_the_thresholds():
    # ARPO: U − 0.2·ΔH ≤ 0.5; AEPO: (U + 0.2·ΔH)·(1 − 0.05c) ≥ 0.5
    assert arpo_forks(0.6, 0.5) and not arpo_forks(0.61, 0.5)
    assert arpo_forks(0.4, -0.5) and not arpo_forks(0.41, -0.5)
    assert aepo_forks(0.625, 0.0, 4) and not aepo_forks(0.62, 0.0, 4)
    assert not aepo_forks(0.999, 0.0, 10)  # c = 10 halves the probability: no U < 1 reaches τ at ΔH = 0
    assert not aepo_forks(1.0, 5.0, 20)  # c ≥ 20: no entropy rise can fork
    assert aepo_forks(0.4, 0.5, 0) and not aepo_forks(0.39, 0.5, 0)


def test_higher_entropy_rise_forks_more_in_both_modes():
    for mode in ("arpo", "aepo"):
        values = [fork_probability(mode, d) for d in (-1.0, 0.0, 1.0)]
        assert values[0] < values[1] < values[2]


def test_segment_entropy_sums_the_first_tokens_over_log_vocab():
    entropies = [1.0] * 30
    assert segment_entropy(entropies, 20) == 20.0
    assert segment_entropy(entropies, 20, vocab_size=1000) == pytest.approx(20 / math.log(1000))
    assert segment_entropy([0.5, 0.5], 20) == 1.0


def test_pre_monitoring_split_stays_in_range():
    assert initial_rollouts(12, 1.0, 1.0) == 7  # int(12·0.5) + 1
    assert initial_rollouts(12, 100.0, 0.0) == 12  # clamped to k
    assert initial_rollouts(12, 0.0, 100.0) == 1
    for h_root, h_tool in [(0.3, 0.9), (2.0, 1.0), (0.0, 0.0)]:
        assert 1 <= initial_rollouts(8, h_root, h_tool) <= 8


def test_the_first_segment_is_the_baseline_and_a_new_state_starts_empty():
    state = BranchState()
    assert state.delta_h("r0", 2.0) == 0.0
    assert state.delta_h("r0", 2.5) == pytest.approx(0.5)
    assert BranchState().delta_h("r0", 3.0) == 0.0  # no stale baseline from the previous batch


def test_rule_validates_its_budget():
    with pytest.raises(ValueError):
        BranchRule(rollouts_per_task=4, initial_rollouts=5)
    with pytest.raises(ValueError):
        BranchRule(mode="beam")
