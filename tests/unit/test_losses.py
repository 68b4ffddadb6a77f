"""Policy loss, aggregation, importance weights, KL estimators, KL in the reward and entropy against hand-computed
values (each loss's, aggregation's, KL estimator's and TIS mode's own hand-computed check, and the mutation matrix,
are in `test_loss_mutations.py`)."""

import math

import pytest
import torch

from agentrl.errors import ConfigError
from agentrl.registry import resolve
from agentrl.train.aggregation import aggregate
from agentrl.train.config import TrainerConfig
from agentrl.train.importance import importance_weights
from agentrl.train.kl import kl_estimate, kl_k3, kl_penalty_to_go
from agentrl.train.losses import POLICY_LOSSES, entropy_from_logits, ppo_clip_loss, token_logprobs
from agentrl.train.objective import Objective
from agentrl.train.samples import TrainSample, collate

pytestmark = pytest.mark.unit

CLIP_SETTINGS = [
    {"clip_low": 0.2, "clip_high": 0.2, "dual_clip": 0.0},
    {"clip_low": 0.2, "clip_high": 0.28, "dual_clip": 3.0},
    {"clip_low": 0.0, "clip_high": 0.0, "dual_clip": 10.0},
]


def t(values):
    return torch.tensor(values, dtype=torch.float64)


def ppo_grad(log_ratio, advantage, **clip):
    """(loss, d loss / d logπ) of one token with logπ_old = 0."""
    logprobs = t([[log_ratio]]).requires_grad_()
    loss, stats = ppo_clip_loss(logprobs, t([[0.0]]), t([[advantage]]), **clip)
    loss.sum().backward()
    return loss.item(), logprobs.grad.item(), {k: v.item() for k, v in stats.items()}


def test_registered_and_resolvable():
    assert POLICY_LOSSES["ppo_clip"] is ppo_clip_loss
    assert resolve("loss", "ppo_clip") is ppo_clip_loss


@pytest.mark.parametrize("clip", CLIP_SETTINGS)
def test_ratio_one_equals_plain_policy_gradient(clip):
    advantages = t([[1.5, -0.5, 0.0], [-2.0, 0.25, 3.0]])
    logprobs = t([[-0.1, -2.0, -0.7], [-1.2, -0.3, -4.0]]).requires_grad_()
    loss, stats = ppo_clip_loss(logprobs, logprobs.detach(), advantages, **clip)
    loss.sum().backward()
    reference = logprobs.detach().clone().requires_grad_()
    (-advantages * reference).sum().backward()
    torch.testing.assert_close(logprobs.grad, reference.grad)
    torch.testing.assert_close(loss, -advantages)
    for name in ("clip_frac_low", "clip_frac_high", "clip_frac_dual"):
        assert stats[name].sum() == 0


def test_clip_higher_cuts_gradient_above_one_plus_eps_high():
    clip = {"clip_low": 0.2, "clip_high": 0.28, "dual_clip": 3.0}
    loss, grad, stats = ppo_grad(math.log(1.5), 1.0, **clip)
    assert grad == 0.0 and loss == pytest.approx(-1.28) and stats["clip_frac_high"] == 1.0
    loss, grad, stats = ppo_grad(math.log(1.2), 1.0, **clip)
    assert grad == pytest.approx(-1.2) and loss == pytest.approx(-1.2) and stats["clip_frac_high"] == 0.0


def test_algorithms_7_2_worked_example():
    clip = {"clip_low": 0.2, "clip_high": 0.2, "dual_clip": 3.0}
    # A = +1, ρ = 1.5 > 1 + ε_high: PPO gradient 0
    _, grad, _ = ppo_grad(math.log(1.5), 1.0, **clip)
    assert grad == 0.0
    # A = −1, ρ = 1.5: unclipped branch, loss 1.5, gradient +1.5·∇logπ
    loss, grad, stats = ppo_grad(math.log(1.5), -1.0, **clip)
    assert loss == pytest.approx(1.5) and grad == pytest.approx(1.5)
    assert stats["clip_frac_dual"] == 0.0 and stats["clip_frac_high"] == 0.0
    # A = −1, ρ = 5: dual clip caps the loss at c·|A| = 3 with zero gradient
    loss, grad, stats = ppo_grad(math.log(5.0), -1.0, **clip)
    assert loss == pytest.approx(3.0) and grad == 0.0 and stats["clip_frac_dual"] == 1.0
    # without dual clip the same token's loss grows unbounded
    loss, _, _ = ppo_grad(math.log(5.0), -1.0, **{**clip, "dual_clip": 0.0})
    assert loss == pytest.approx(5.0)


def test_low_clip_for_negative_advantage():
    # A = −1, ρ = 0.5 < 1 − ε_low = 0.8: loss = max(0.5, 0.8) = 0.8, clipped, no gradient
    loss, grad, stats = ppo_grad(math.log(0.5), -1.0, clip_low=0.2, clip_high=0.28, dual_clip=3.0)
    assert loss == pytest.approx(0.8) and grad == 0.0 and stats["clip_frac_low"] == 1.0


def test_dual_clip_bounds_negative_advantage_loss():
    advantages = t([[-2.0, -0.5, -1.0]])
    logprobs = t([[3.0, 5.0, 0.1]])
    loss, _ = ppo_clip_loss(
        logprobs, torch.zeros_like(logprobs), advantages, clip_low=0.2, clip_high=0.2, dual_clip=3.0
    )
    assert (loss <= 3.0 * advantages.abs() + 1e-12).all()
    torch.testing.assert_close(loss, t([[6.0, 1.5, math.exp(0.1)]]))


LOSS = t([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]])
MASK = torch.tensor([[False, True, True, False], [True, True, True, True]])


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("token-mean", (2 + 3 + 5 + 6 + 7 + 8) / 6),  # 31 / 6
        ("seq-mean-token-mean", ((2 + 3) / 2 + (5 + 6 + 7 + 8) / 4) / 2),  # (2.5 + 6.5) / 2 = 4.5
        ("seq-mean-token-sum", 31 / 2),
        ("seq-mean-token-sum-norm", 31 / (2 * 4)),
    ],
)
def test_aggregation_modes_by_hand(mode, expected):
    value = aggregate(LOSS, MASK, mode, num_sequences=2, num_tokens=6, norm_tokens=4)
    assert value.item() == pytest.approx(expected)


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"])
def test_microbatches_sum_to_the_minibatch_value(mode):
    torch.manual_seed(0)
    loss = torch.randn(6, 9, dtype=torch.float64)
    mask = torch.rand(6, 9) > 0.3
    totals = {"num_sequences": 6, "num_tokens": int(mask.sum()), "norm_tokens": 9}
    whole = aggregate(loss, mask, mode, **totals)
    # rows split unevenly, and the second part padded to a different width (padding is masked)
    first = aggregate(loss[:2], mask[:2], mode, **totals)
    padded_loss = torch.cat([loss[2:], torch.full((4, 3), 1e9, dtype=torch.float64)], dim=1)
    padded_mask = torch.cat([mask[2:], torch.zeros(4, 3, dtype=torch.bool)], dim=1)
    second = aggregate(padded_loss, padded_mask, mode, **totals)
    torch.testing.assert_close(first + second, whole)


def test_unknown_aggregation_mode():
    with pytest.raises(ValueError, match="token-mean"):
        aggregate(LOSS, MASK, "sum", num_sequences=2, num_tokens=6, norm_tokens=4)


def test_masked_token_gets_exactly_zero_gradient():
    logprobs = t([[-0.5, -1.0, -2.0]]).requires_grad_()
    old = t([[-0.4, -50.0, -2.5]])  # the masked middle token is far off-policy
    advantages = t([[1.0, 1e6, -1.0]])
    mask = torch.tensor([[True, False, True]])
    loss, _ = ppo_clip_loss(logprobs, old, advantages, clip_low=0.2, clip_high=0.28, dual_clip=3.0)
    aggregate(loss, mask, "token-mean", num_sequences=1, num_tokens=2, norm_tokens=3).backward()
    assert logprobs.grad[0, 1].item() == 0.0
    assert logprobs.grad[0, 0].item() != 0.0


def test_kl_k3_zero_when_equal_positive_otherwise():
    logprobs = t([-0.1, -1.0, -3.0])
    assert torch.equal(kl_k3(logprobs, logprobs), torch.zeros(3, dtype=torch.float64))
    kl = kl_k3(logprobs, t([-0.2, -0.5, -3.5]))
    assert (kl > 0).all()
    # δ = ref − logp = 0.5: e^0.5 − 0.5 − 1
    assert kl[1].item() == pytest.approx(math.exp(0.5) - 1.5)
    assert kl_k3(t([0.0]), t([-100.0])).item() <= 10.0
    assert kl_k3(t([-100.0]), t([0.0])).item() == 10.0


def test_token_logprobs_and_entropy_by_hand():
    logits = torch.log(t([[[0.5, 0.25, 0.25], [1.0 / 3, 1.0 / 3, 1.0 / 3]]])) + 7.0  # shift is irrelevant
    targets = torch.tensor([[1, 2]])
    torch.testing.assert_close(token_logprobs(logits, targets), t([[math.log(0.25), math.log(1.0 / 3)]]))
    expected_entropy = t([[-(0.5 * math.log(0.5) + 0.5 * math.log(0.25)), math.log(3.0)]])
    torch.testing.assert_close(entropy_from_logits(logits), expected_entropy)


def test_low_precision_logits_are_upcast():
    logits = torch.randn(2, 3, 11).to(torch.bfloat16)
    targets = torch.randint(0, 11, (2, 3))
    assert token_logprobs(logits, targets).dtype == torch.float32
    assert entropy_from_logits(logits).dtype == torch.float32
    expected = torch.log_softmax(logits.float(), -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(token_logprobs(logits, targets), expected)


# --- importance weights against the sampler (each mode's values: test_loss_mutations.py) ------------------------


def test_unknown_tis_mode():
    with pytest.raises(ConfigError, match="tis_mode"):
        importance_weights("seq", t([[0.0]]), t([[0.0]]), torch.tensor([[True]]), 2.0)


# --- KL estimators (each one's values: test_loss_mutations.py) and the KL penalty in the reward ------------------


def test_unknown_kl_estimator():
    with pytest.raises(ConfigError, match="kl_estimator"):
        kl_estimate("k4", t([-1.0]), t([-0.5]))


def test_kl_penalty_to_go_sums_later_policy_tokens_only():
    kl = t([[0.1, 0.2, 0.3, 0.4]])
    mask = torch.tensor([[True, False, True, True]])
    # 0.1 + 0.3 + 0.4, then 0.3 + 0.4 (the masked 0.2 adds nothing), 0.3 + 0.4, 0.4
    torch.testing.assert_close(kl_penalty_to_go(kl, mask), t([[0.8, 0.7, 0.7, 0.4]]))


def _objective_batch():
    # Token 0 is the prompt; tokens 1, 3, 4 are sampled, token 2 is tool output: after the shift the loss mask is
    # [T, F, T, T] and every sampled token has A = 1.
    mask = (False, True, False, True, True)
    sample = TrainSample(
        token_ids=(1, 2, 3, 4, 5),
        loss_mask=mask,
        advantages=tuple(1.0 if m else 0.0 for m in mask),
        sampler_logprobs=(0.0, -1.0, 0.0, -1.0, -1.0),
    )
    return collate([sample], 0, torch.device("cpu"))


RHO = math.exp(0.1)  # log π = −1 against log π_old = −1.1: unclipped


def _objective_grad(**overrides):
    config = TrainerConfig(**{"minibatches_per_step": 1, "kl_coef": 0.1, "kl_estimator": "k1", **overrides})
    batch = _objective_batch()
    logprobs = torch.full((1, 4), -1.0, dtype=torch.float64, requires_grad=True)
    old = torch.full((1, 4), -1.1, dtype=torch.float64)
    ref = t([[-1.6, -1.0, -0.6, -1.3]])  # k1 at π_old: 0.5, (masked), −0.5, 0.2; at π_θ: 0.6, (masked), −0.4, 0.3
    sums: dict[str, float] = {}
    totals = {"num_sequences": 1, "num_tokens": 3}
    loss, pg_loss = Objective(config, episode_token_budget=64)(batch, logprobs, old, None, ref, totals, sums)
    loss.backward()
    return loss.item(), pg_loss.item(), logprobs.grad, sums["kl"]


def test_kl_in_reward_shifts_each_advantage_by_the_penalty_to_go_and_leaves_the_loss():
    # to-go of k1 at π_old over the policy tokens: 0.5 − 0.5 + 0.2 = 0.2, −0.5 + 0.2 = −0.3, 0.2; β = 0.1, so
    # A' = 1 − 0.02, 1 + 0.03, 1 − 0.02; token-mean over 3 tokens: loss −A'·ρ / 3, d loss / d logπ = −A'·ρ / 3
    loss, pg_loss, grad, kl_sum = _objective_grad(kl_in_reward=True)
    torch.testing.assert_close(grad, t([[-0.98 * RHO / 3, 0.0, -1.03 * RHO / 3, -0.98 * RHO / 3]]))
    assert loss == pg_loss == pytest.approx(-(0.98 + 1.03 + 0.98) * RHO / 3)
    assert kl_sum == pytest.approx(0.2)


def test_kl_as_a_loss_term_adds_its_gradient_instead():
    # loss = −ρ·mean A + β·mean k1(π_θ); d/dlogπ = −ρ/3 + 0.1/3 on every policy token (k1's gradient is 1)
    loss, pg_loss, grad, kl_sum = _objective_grad()
    torch.testing.assert_close(grad, t([[(-RHO + 0.1) / 3, 0.0, (-RHO + 0.1) / 3, (-RHO + 0.1) / 3]]))
    assert pg_loss == pytest.approx(-RHO) and kl_sum == pytest.approx(0.5)
    assert loss == pytest.approx(pg_loss + 0.1 * 0.5 / 3)
    _, _, grad, _ = _objective_grad(kl_estimator="k2")  # k2's gradient is logπ − logπ_ref = 0.6, −0.4, 0.3
    torch.testing.assert_close(grad, t([[(-RHO + 0.06) / 3, 0.0, (-RHO - 0.04) / 3, (-RHO + 0.03) / 3]]))


@pytest.mark.parametrize(
    ("overrides", "pg_loss", "dropped"),
    [
        # the sampler's log π = −1 against log π_old = −1.1: weight e^−0.1 on every policy token, so the policy loss
        # is −ρ·e^−0.1 = −1 per token; with a floor of 0.95 the masked mode drops all three tokens
        ({"tis_cap": 2.0}, -1.0, 0.0),
        ({"tis_cap": 2.0, "tis_mode": "token_mask", "tis_floor": 0.95}, 0.0, 3.0),
    ],
)
def test_importance_weight_multiplies_each_policy_token_loss(overrides, pg_loss, dropped):
    logprobs = torch.full((1, 4), -1.0, dtype=torch.float64)
    sums: dict[str, float] = {}
    _, got = Objective(TrainerConfig(minibatches_per_step=1, **overrides), episode_token_budget=64)(
        _objective_batch(), logprobs, logprobs - 0.1, None, None, {"num_sequences": 1, "num_tokens": 3}, sums
    )
    assert got.item() == pytest.approx(pg_loss)
    assert sums["tis_capped_frac"] == dropped


@pytest.mark.parametrize(("norm_tokens", "budget", "divisor"), [(0, 64, 64), (0, 1000, 1000), (10, 64, 10)])
def test_dr_grpo_divides_by_the_constant_not_by_the_batch(norm_tokens, budget, divisor):
    config = TrainerConfig(minibatches_per_step=1, loss_agg="seq-mean-token-sum-norm", loss_agg_norm_tokens=norm_tokens)
    logprobs = torch.full((1, 4), -1.0, dtype=torch.float64)
    totals = {"num_sequences": 1, "num_tokens": 3}
    _, pg_loss = Objective(config, episode_token_budget=budget)(
        _objective_batch(), logprobs, logprobs, None, None, totals, {}
    )
    assert pg_loss.item() == pytest.approx(-3.0 / divisor)  # three policy tokens with A = 1, one sequence


def test_objective_refuses_settings_it_cannot_honour():
    for overrides, key in [
        ({"loss": "gspo", "minibatches_per_step": 1}, "trainer.minibatches_per_step"),
        ({"loss": "cispo", "minibatches_per_step": 1}, "trainer.update_epochs"),
        ({"tis_mode": "tokens"}, "tis_mode"),
        ({"loss_agg": "sum"}, "loss_agg"),
        ({"kl_in_reward": True}, "kl_coef"),
        ({"cov_token_fraction": 0.0}, "cov_token_fraction"),
        ({"tis_cap": 2.0, "tis_floor": 0.5}, "tis_floor"),  # a truncating mode has no floor
        ({"tis_cap": 0.4, "tis_floor": 0.5, "tis_mode": "token_mask"}, "tis_floor"),
    ]:
        with pytest.raises(ConfigError, match=key):
            Objective(TrainerConfig(**overrides), episode_token_budget=64)
    Objective(TrainerConfig(loss="ppo_clip", minibatches_per_step=1), episode_token_budget=64)  # plain PG: allowed
    Objective(TrainerConfig(loss="gspo", minibatches_per_step=1, update_epochs=2), episode_token_budget=64)
