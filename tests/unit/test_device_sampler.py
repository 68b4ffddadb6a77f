"""The device sampler draws from exactly the distribution it reports, with randomness that is each row's own."""

from __future__ import annotations

import math

import pytest
import torch

from agentrl.policy.device_sampler import (
    StepPlan,
    inverse_cdf_R,
    mix32,
    mix32_int,
    row_keys,
    sample_step,
    uniform_R,
)

pytestmark = pytest.mark.unit

V = 12
LOGITS_V = torch.tensor([2.0, 1.5, 1.4, 0.3, 0.0, -0.5, -1.0, -1.2, -2.0, -3.0, -4.0, -6.0])


def chi_square_limit(df: int, z: float = 3.09) -> float:
    """The 0.999 quantile of chi-square with `df` degrees of freedom (Wilson-Hilferty)."""
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


def expected_V(temperature: float, top_p: float, banned: tuple[int, ...] = ()) -> torch.Tensor:
    """softmax(logits / T) over the allowed ids, cut to the nucleus and renormalised, computed directly."""
    logits = LOGITS_V.double().clone()
    logits[list(banned)] = -math.inf
    probs = (logits / temperature).softmax(-1)
    kept, mass = torch.zeros(V, dtype=torch.bool), 0.0
    for i in probs.argsort(descending=True).tolist():
        if mass >= top_p:
            break
        kept[i], mass = True, mass + float(probs[i])
    probs = torch.where(kept, probs, 0.0)
    return probs / probs.sum()


def draw(rows: int, temperature: float, top_p: float, keys=None, steps=None, banned=None, plan=None):
    keys = keys if keys is not None else torch.tensor([row_keys(s) for s in range(rows)])
    steps = steps if steps is not None else torch.zeros(rows, dtype=torch.long)
    return sample_step(
        LOGITS_V.expand(rows, V), torch.full((rows,), max(temperature, 1e-6)), torch.full((rows,), top_p), keys, steps,
        plan or StepPlan(top_p=top_p < 1), banned,
    )  # fmt: skip


def chi_square(counts_K: torch.Tensor, expected_K: torch.Tensor) -> float:
    total = counts_K.sum()
    return float((((counts_K - total * expected_K) ** 2) / (total * expected_K)).sum())


@pytest.mark.parametrize(("temperature", "top_p"), [(1.0, 1.0), (0.7, 0.9), (1.3, 0.6)])
def test_draws_over_seeds_and_over_steps_follow_the_distribution(temperature, top_p):
    expected = expected_V(temperature, top_p)
    support = expected > 0
    n = 40_000
    over_seeds, _ = draw(n, temperature, top_p)
    one_key = torch.tensor([row_keys(12345)]).expand(n, 2)
    over_steps, _ = draw(n, temperature, top_p, keys=one_key, steps=torch.arange(n))
    for tokens in (over_seeds, over_steps):
        counts = torch.bincount(tokens, minlength=V).double()
        assert counts[~support].sum() == 0  # never outside the nucleus
        assert chi_square(counts[support], expected[support]) < chi_square_limit(int(support.sum()) - 1)


def test_successive_draws_and_neighbouring_seeds_are_independent():
    n, k = 40_000, 4
    expected = expected_V(1.0, 1.0)
    top = expected.argsort(descending=True)[: k - 1]
    bucket = torch.full((V,), k - 1, dtype=torch.long)
    bucket[top] = torch.arange(k - 1)
    one_key = torch.tensor([row_keys(7)]).expand(n + 1, 2)
    over_steps = bucket[draw(n + 1, 1.0, 1.0, keys=one_key, steps=torch.arange(n + 1))[0]]
    over_seeds = bucket[draw(n + 1, 1.0, 1.0)[0]]
    for tokens in (over_steps, over_seeds):
        pairs = torch.bincount(tokens[:-1] * k + tokens[1:], minlength=k * k).double().view(k, k)
        outer = pairs.sum(1, keepdim=True) * pairs.sum(0, keepdim=True) / pairs.sum()
        statistic = float(((pairs - outer) ** 2 / outer).sum())
        assert statistic < chi_square_limit((k - 1) ** 2)


def test_the_reported_logprob_and_entropy_are_those_of_the_sampled_distribution():
    expected = expected_V(0.7, 0.9, banned=(0,))
    banned = torch.zeros(64, V, dtype=torch.bool)
    banned[:, 0] = True
    tokens, packed = draw(64, 0.7, 0.9, banned=banned, plan=StepPlan(top_p=True, top_k=3))
    assert torch.equal(packed[:, 0].long(), tokens)
    torch.testing.assert_close(packed[:, 1].double(), expected[tokens].log(), rtol=0, atol=1e-5)
    entropy = -(expected[expected > 0] * expected[expected > 0].log()).sum()
    torch.testing.assert_close(packed[:, 2].double(), entropy.expand(64), rtol=0, atol=1e-5)
    # the top alternatives: log-probs of that distribution, most likely first, then their ids
    best = expected.argsort(descending=True)[:3]
    assert packed[0, 6:9].long().tolist() == best.tolist()
    torch.testing.assert_close(packed[0, 3:6].double(), expected[best].log(), rtol=0, atol=1e-5)


def test_a_rows_draw_depends_on_its_seed_and_step_only():
    keys = torch.tensor([row_keys(s) for s in (3, 4, 5, 6)])
    steps = torch.tensor([0, 7, 2, 9])
    together, _ = draw(4, 1.0, 1.0, keys=keys, steps=steps)
    for r in range(4):
        alone, _ = draw(1, 1.0, 1.0, keys=keys[r : r + 1], steps=steps[r : r + 1])
        with_others, _ = draw(3, 1.0, 1.0, keys=torch.cat([keys[r : r + 1], keys[:2]]), steps=steps[[r, 0, 1]])
        assert int(alone[0]) == int(together[r]) == int(with_others[0])


def test_greedy_rows_take_the_argmax_beside_sampled_rows():
    logits = torch.randn(6, V, generator=torch.Generator().manual_seed(1))
    temperature = torch.tensor([1e-6, 1.0, 1e-6, 1.0, 1e-6, 1.0])
    keys = torch.tensor([row_keys(s) for s in range(6)])
    tokens, packed = sample_step(
        logits, temperature, torch.full((6,), 2.0), keys, torch.zeros(6, dtype=torch.long), StepPlan(greedy="some")
    )
    assert tokens[::2].tolist() == logits[::2].argmax(-1).tolist()
    assert packed[::2, 1].abs().max() < 1e-5  # near one-hot


def test_banned_ids_are_never_drawn_even_when_most_likely():
    banned = torch.zeros(2000, V, dtype=torch.bool)
    banned[:, :3] = True  # the three most likely ids
    for top_p, greedy in ((1.0, "none"), (0.5, "none"), (1.0, "all")):
        temperature = 1e-6 if greedy == "all" else 1.0
        tokens, packed = draw(2000, temperature, top_p, banned=banned, plan=StepPlan(greedy=greedy, top_p=top_p < 1))
        assert int(tokens.min()) >= 3
        assert bool(torch.isfinite(packed[:, 1]).all())


def test_the_inverse_cdf_skips_zero_probability_ids_at_either_end_of_the_unit_interval():
    probs = torch.tensor([[0.0, 0.25, 0.0, 0.75, 0.0]] * 2)
    extremes = torch.tensor([0.0, 1 - 2.0**-52], dtype=torch.float64)
    assert inverse_cdf_R(probs, extremes).tolist() == [1, 3]


def test_the_hash_is_a_bijection_computed_alike_on_host_and_device():
    x = torch.arange(1 << 16) * 65_537 + 12_345
    hashed = mix32(x)
    assert hashed.unique().numel() == x.numel()
    assert all(int(hashed[i]) == mix32_int(int(x[i])) for i in range(0, x.numel(), 997))
    assert int(mix32(torch.tensor([2**32 - 1]))[0]) == mix32_int(2**32 - 1) < 2**32
    u = uniform_R(torch.tensor([row_keys(1), row_keys(2)]), torch.tensor([0, 0]))
    assert u.dtype == torch.float64 and bool(((u >= 0) & (u < 1)).all()) and u[0] != u[1]
