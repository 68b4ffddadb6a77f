"""The unbiased pass@k estimator against its definition (enumerating every k-subset of the samples)."""

import itertools
import math

import pytest

from agentrl.eval.passk import k_values, mean_pass_at_k, pass_at_k

pytestmark = pytest.mark.unit


def by_enumeration(n: int, c: int, k: int) -> float:
    outcomes = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(outcomes[i] for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_matches_the_probability_over_k_subsets(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(by_enumeration(n, c, k), abs=1e-12)


def test_closed_form_and_edges():
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(200, 1, 100) == pytest.approx(1 - math.comb(199, 100) / math.comb(200, 100))
    assert pass_at_k(5, 0, 5) == 0.0 and pass_at_k(5, 1, 5) == 1.0
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)
    with pytest.raises(ValueError):
        pass_at_k(2, 3, 1)


def test_mean_over_tasks_skips_tasks_with_too_few_samples():
    assert mean_pass_at_k([(4, 1), (4, 3)], 1) == pytest.approx((0.25 + 0.75) / 2)
    assert mean_pass_at_k([(4, 1), (1, 1)], 2) == pytest.approx(pass_at_k(4, 1, 2))
    assert math.isnan(mean_pass_at_k([], 1))


def test_reported_k():
    assert k_values(1) == [1] and k_values(8) == [1, 2, 4, 8] and k_values(10) == [1, 2, 4, 8, 10]
