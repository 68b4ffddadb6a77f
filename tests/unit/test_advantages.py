"""Group advantage estimators against hand-computed values."""

import pytest
import torch

from agentrl.credit.advantages import (
    ADVANTAGE_ESTIMATORS,
    dr_grpo,
    grpo,
    lite_ppo,
    ngrpo,
    register_advantage,
    reinforce_pp,
    rloo,
)
from agentrl.registry import resolve

pytestmark = pytest.mark.unit


def t(values):
    return torch.tensor(values, dtype=torch.float64)


def idx(values):
    return torch.tensor(values, dtype=torch.long)


def test_registry_names_and_resolution():
    assert {"grpo", "dr_grpo", "rloo", "lite_ppo", "ngrpo", "mc_grpo", "reinforce_pp"} <= set(ADVANTAGE_ESTIMATORS)
    assert resolve("advantage", "reinforce_pp") is reinforce_pp
    assert resolve("advantage", "rloo") is rloo
    assert resolve("advantage", "agentrl.credit.advantages:dr_grpo") is dr_grpo


def test_register_twice_is_an_error():
    with pytest.raises(ValueError, match="already registered"):
        register_advantage("grpo")(grpo)


def test_grpo_known_group_population_std():
    # mean 0.5, population std 0.5 → ±1 (sample std 0.577 would give ±0.866)
    advantages = grpo(t([1, 0, 0, 1]), idx([0, 0, 0, 0]), eps=0.0)
    torch.testing.assert_close(advantages, t([1, -1, -1, 1]))


def test_grpo_eps_and_uneven_group():
    # rewards [3, 0, 0]: mean 1, population std sqrt(2); (3 - 1)/sqrt(2) = 1.41421, (0 - 1)/sqrt(2) = -0.70711
    advantages = grpo(t([3, 0, 0]), idx([0, 0, 0]))
    torch.testing.assert_close(advantages, t([1.4142126, -0.7071063, -0.7071063]), atol=1e-6, rtol=0)


def test_constant_group_gets_exact_zeros():
    rewards = t([0.1, 0.1, 0.1, 0.7, 0.2])
    index = idx([0, 0, 0, 1, 1])
    for name, fn in ADVANTAGE_ESTIMATORS.items():
        if name == "ngrpo":  # grades constant groups against a virtual r_max sample on purpose
            continue
        advantages = fn(rewards, index)
        assert torch.equal(advantages[:3], torch.zeros(3, dtype=torch.float64)), name
        assert (advantages[3:] != 0).all(), name


def test_interleaved_groups_sum_to_zero_and_match_separate_computation():
    rewards = t([1.0, 5.0, 0.0, 2.0, 1.0, 9.0, 0.0, 3.0])
    index = idx([0, 1, 0, 2, 0, 1, 0, 2])
    for name in ("grpo", "dr_grpo", "rloo", "lite_ppo"):
        advantages = ADVANTAGE_ESTIMATORS[name](rewards, index)
        sums = torch.zeros(3, dtype=torch.float64).index_add_(0, index, advantages)
        torch.testing.assert_close(sums, torch.zeros(3, dtype=torch.float64), atol=1e-9, rtol=0)
    # group 0 = [1, 0, 1, 0]: mean 0.5, std 0.5 → ±1; group 1 = [5, 9]: ±1; group 2 = [2, 3]: ∓1
    torch.testing.assert_close(grpo(rewards, index, eps=0.0), t([1, -1, -1, -1, 1, 1, -1, 1]))


def test_dr_grpo_is_mean_centred_only():
    advantages = dr_grpo(t([4, 0, 2, 10, 20]), idx([0, 0, 0, 1, 1]))
    torch.testing.assert_close(advantages, t([2, -2, 0, -5, 5]))


def test_rloo_by_hand():
    # [1, 0, 0, 1]: 1 − mean(0, 0, 1) = 2/3; 0 − mean(1, 0, 1) = −2/3
    torch.testing.assert_close(rloo(t([1, 0, 0, 1]), idx([0] * 4)), t([2, -2, -2, 2]) / 3)
    # [3, 1, 2]: 3 − 1.5 = 1.5, 1 − 2.5 = −1.5, 2 − 2 = 0
    torch.testing.assert_close(rloo(t([3, 1, 2]), idx([0] * 3)), t([1.5, -1.5, 0.0]))


def test_rloo_single_member_group_is_zero():
    advantages = rloo(t([5.0, 1.0, 0.0]), idx([0, 1, 1]))
    torch.testing.assert_close(advantages, t([0.0, 1.0, -1.0]))


def test_lite_ppo_group_mean_batch_std():
    # group 0 = [1, 0], group 1 = [1, 1]; batch of 4 rewards [1, 0, 1, 1]: population std = sqrt(3)/4
    advantages = lite_ppo(t([1, 0, 1, 1]), idx([0, 0, 1, 1]), eps=0.0)
    batch_std = 3**0.5 / 4
    torch.testing.assert_close(advantages, t([0.5 / batch_std, -0.5 / batch_std, 0.0, 0.0]))


def test_lite_ppo_other_group_changes_only_the_scale():
    index = idx([0, 0, 0, 1, 1, 1])
    before = lite_ppo(t([1, 0, 0, 0, 1, 0]), index)
    after = lite_ppo(t([1, 0, 0, 10, -4, 3]), index)
    ratio = after[:3] / before[:3]
    torch.testing.assert_close(ratio, ratio[0].expand(3))
    assert not torch.allclose(after[:3], before[:3])
    assert (torch.sign(after[:3]) == torch.sign(before[:3])).all()


def test_integer_rewards_and_float32_are_accepted():
    advantages = grpo(torch.tensor([1, 0]), idx([0, 0]))
    assert advantages.is_floating_point()
    advantages = rloo(torch.tensor([1.0, 0.0], dtype=torch.float32), idx([0, 0]))
    assert advantages.dtype == torch.float32


def test_reinforce_pp_constant_group_stays_zero_and_counts_in_the_batch_std():
    # groups [1, 0] and [1, 1]: centred [½, −½, 0, 0]; batch std √((¼ + ¼ + 0 + 0)/4) = √(1/8) → ±√2 (GRPO: ±1)
    advantages = reinforce_pp(t([1, 0, 1, 1]), idx([0, 0, 1, 1]), eps=0.0)
    torch.testing.assert_close(advantages, t([2**0.5, -(2**0.5), 0.0, 0.0]))
    assert torch.equal(advantages[2:], torch.zeros(2, dtype=torch.float64))


def test_ngrpo_r_max_sets_the_virtual_sample():
    # [0, 0] with r_max = 2: [0, 0, 2] → mean 2/3, std √(8/9) → −(2/3)/√(8/9) = −1/√2 each
    torch.testing.assert_close(ngrpo(t([0, 0]), idx([0, 0]), r_max=2.0, eps=0.0), t([-(0.5**0.5)] * 2))
    # a group that scored the best reward throughout is constant: exactly 0
    assert torch.equal(ngrpo(t([2, 2]), idx([0, 0]), r_max=2.0), torch.zeros(2, dtype=torch.float64))
