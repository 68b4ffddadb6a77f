"""The property checklist of algorithms.md §8 for credit, asserted with hypothesis for every advantage estimator and
credit assigner (branch attribution: `test_branch_attribution.py`; rewards, judges and combinators:
`test_reward_properties.py`; the losses: `test_loss_properties.py`; hand-computed values and the mutations they
catch: `test_credit_mutations.py`).

The ARPO/AEPO rollout properties (exactly k rollouts per prompt, byte-identical fork prefixes, pre-monitoring
m ∈ [1, k]) are properties of the branching rollout engine and are asserted with it: `tests/unit/test_branching.py`
and `tests/integration/test_branching_rollout.py`.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentrl.config import TrainerConfig
from agentrl.credit.advantages import ADVANTAGE_ESTIMATORS, lite_ppo, mc_grpo, median_pivots, ngrpo
from agentrl.credit.assign import assign_credit
from agentrl.credit.gigpo import anchor_step_advantages, hgpo_step_advantages
from agentrl.credit.igpo import discounted_suffix_sum
from agentrl.credit.scored_turns import token_advantages
from agentrl.types import StopReason, Task, ToolCall, ToolResult, Trajectory, TrajectoryGroup, Turn

pytestmark = pytest.mark.unit

FAST = settings(max_examples=20, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
TASK = Task("t", "?", answer="Paris")
REWARDS = st.sampled_from([0.0, 0.0, 1.0, 1.0, 0.5, -1.0, 2.0])


def grouped(min_size: int = 1, max_size: int = 6):
    """(rewards_B, group_index_B) for 1–4 interleaved-free groups."""
    return st.lists(st.lists(REWARDS, min_size=min_size, max_size=max_size), min_size=1, max_size=4).map(_flatten)


def _flatten(groups: list[list[float]]) -> tuple[torch.Tensor, torch.Tensor]:
    rewards = [r for g in groups for r in g]
    index = [k for k, g in enumerate(groups) for _ in g]
    return torch.tensor(rewards, dtype=torch.float64), torch.tensor(index, dtype=torch.long)


def _per_group(values_B: torch.Tensor, index_B: torch.Tensor) -> list[torch.Tensor]:
    return [values_B[index_B == k] for k in range(int(index_B.max()) + 1)]


# --- trajectory-level estimators -----------------------------------------------------------------------


@FAST
@given(grouped())
def test_grpo_rloo_dr_grpo_lite_ppo_reinforce_pp_sum_to_zero_per_group(data):
    rewards, index = data
    for name in ("grpo", "rloo", "dr_grpo", "lite_ppo", "reinforce_pp"):
        for group in _per_group(ADVANTAGE_ESTIMATORS[name](rewards, index), index):
            assert float(group.sum()) == pytest.approx(0.0, abs=1e-6), name


@FAST
@given(grouped(min_size=2))
def test_grpo_normalised_group_has_unit_std_and_constant_groups_exact_zero(data):
    rewards, index = data
    advantages = ADVANTAGE_ESTIMATORS["grpo"](rewards, index)
    for r, a in zip(_per_group(rewards, index), _per_group(advantages, index), strict=True):
        if float(r.max()) == float(r.min()):
            assert torch.equal(a, torch.zeros_like(a))
        else:
            assert float(a.std(correction=0)) == pytest.approx(1.0, abs=1e-4)


@FAST
@given(grouped(min_size=2))
def test_reinforce_pp_whole_batch_has_unit_std_and_keeps_each_groups_ranking(data):
    rewards, index = data
    advantages = ADVANTAGE_ESTIMATORS["reinforce_pp"](rewards, index)
    if all(float(r.max()) == float(r.min()) for r in _per_group(rewards, index)):
        assert torch.equal(advantages, torch.zeros_like(advantages))
        return
    # one scale for the whole batch (not per group): the batch of advantages has std 1
    assert float(advantages.std(correction=0)) == pytest.approx(1.0, abs=1e-4)
    centred = ADVANTAGE_ESTIMATORS["dr_grpo"](rewards, index)
    scale = advantages[centred != 0] / centred[centred != 0]
    torch.testing.assert_close(scale, torch.full_like(scale, float(scale[0])))


@FAST
@given(grouped())
def test_group_constant_rewards_give_zero_advantage_for_every_estimator(data):
    rewards, index = data
    for name, fn in ADVANTAGE_ESTIMATORS.items():
        advantages = fn(rewards, index)
        for r, a in zip(_per_group(rewards, index), _per_group(advantages, index), strict=True):
            constant = float(r.max()) == float(r.min())
            if constant and (name != "ngrpo" or float(r[0]) == 1.0):
                assert torch.equal(a, torch.zeros_like(a)), name


@FAST
@given(grouped(min_size=2), st.lists(REWARDS, min_size=2, max_size=5))
def test_lite_ppo_another_groups_rewards_change_only_the_scale(data, other):
    rewards, index = data
    before = lite_ppo(rewards, index)
    extra = torch.tensor(other, dtype=torch.float64)
    extra_index = torch.full((len(other),), int(index.max()) + 1)
    after = lite_ppo(torch.cat([rewards, extra]), torch.cat([index, extra_index]))[: len(rewards)]
    nonzero = before.abs() > 1e-9
    assert torch.equal(before == 0, after == 0)
    if nonzero.any():
        scale = after[nonzero] / before[nonzero]
        assert float(scale.min()) > 0
        torch.testing.assert_close(scale, torch.full_like(scale, float(scale[0])))


@FAST
@given(grouped())
def test_mc_grpo_one_zero_advantage_pivot_per_odd_group(data):
    rewards, index = data
    pivots = median_pivots(rewards, index)
    advantages = mc_grpo(rewards, index)
    for k, group in enumerate(_per_group(pivots, index)):
        assert int(group.sum()) == (len(group) % 2), k
    assert torch.equal(advantages[pivots], torch.zeros(int(pivots.sum()), dtype=advantages.dtype))


def test_mc_grpo_pivot_is_left_out_of_the_loss_and_g_samples_contribute():
    # G + 1 = 5 rollouts, median 1: the pivot is the middle one by reward, the other 4 train
    outcomes = [0.0, 1.0, 3.0, 1.0, 2.0]
    group = TrajectoryGroup(TASK, tuple(_traj(f"r{i}", o, [None]) for i, o in enumerate(outcomes)))
    config = TrainerConfig(advantage="mc_grpo", skip_zero_advantage_groups=False)
    samples, metrics = assign_credit([group], config=config)
    assert len(samples) == 4 and metrics["credit/pivots_excluded"] == 1.0
    # r1 is the pivot (first of the tied medians in reward order); r3 ties with it but still trains, at A = 0
    assert sorted(s.advantages[2] for s in samples) == pytest.approx(sorted(_mc(outcomes)[[0, 2, 3, 4]].tolist()))


def _mc(outcomes):
    return mc_grpo(torch.tensor(outcomes), torch.zeros(len(outcomes), dtype=torch.long))


@given(st.integers(1, 8))
def test_ngrpo_all_wrong_group_gets_identical_negative_advantages(size):
    advantages = ngrpo(torch.zeros(size), torch.zeros(size, dtype=torch.long), r_max=1.0)
    assert torch.equal(advantages, torch.full_like(advantages, float(advantages[0])))
    # μ' = 1/(G+1), σ' = sqrt(G)/(G+1) → A = −1/sqrt(G)
    assert float(advantages[0]) == pytest.approx(-1 / math.sqrt(size), rel=1e-5)


# --- GiGPO / HGPO step groups ---------------------------------------------------------------------------


@FAST
@given(grouped(), st.booleans())
def test_gigpo_step_advantages_sum_to_zero_per_cluster_singletons_zero(data, std_norm):
    returns, clusters = data
    advantages = anchor_step_advantages(returns, clusters, std_norm=std_norm)
    for r, a in zip(_per_group(returns, clusters), _per_group(advantages, clusters), strict=True):
        assert float(a.sum()) == pytest.approx(0.0, abs=1e-6)
        if len(a) == 1 or float(r.max()) == float(r.min()):
            assert torch.equal(a, torch.zeros_like(a))
        elif std_norm:
            assert float(a.std(correction=0)) == pytest.approx(1.0, abs=1e-4)


@FAST
@given(st.lists(REWARDS, min_size=1, max_size=8))
def test_hgpo_steps_without_company_at_any_level_get_zero(returns):
    n = len(returns)
    levels = torch.arange(n).repeat(3, 1)  # every step alone at every level
    advantages = hgpo_step_advantages(torch.tensor(returns), levels)
    assert torch.equal(advantages, torch.zeros(n))


# --- credit assigners on trajectories -------------------------------------------------------------------


def _turn(k: int, reward: float | None, obs: int, *, tool: bool = True) -> Turn:
    calls = (ToolCall(f"c{k}", "search", {}),) if tool else ()
    results = (ToolResult(f"c{k}", "ok"),) if tool else ()
    components = {} if reward is None else {"prm": reward}
    return Turn(
        (10 + k, 11 + k),
        (-0.5, -0.5),
        (1.0, 1.0),
        "",
        tool_calls=calls,
        tool_results=results,
        observation_ids=(obs, obs) if tool else (),
        reward=reward,
        reward_components=components,
    )


def _traj(tid: str, outcome: float | None, turn_rewards, *, stop=StopReason.ANSWERED, obs=None) -> Trajectory:
    n = len(turn_rewards)
    obs = obs or [k % 2 for k in range(n)]
    turns = tuple(_turn(k, r, obs[k], tool=k < n - 1) for k, r in enumerate(turn_rewards))
    return Trajectory("t", "g", tid, (1, 2), turns, stop, reward=outcome, reward_components={"outcome": outcome or 0})


CREDIT_CONFIGS = [
    *(TrainerConfig(credit="trajectory", advantage=name) for name in ("grpo", "dr_grpo", "rloo", "lite_ppo")),
    TrainerConfig(credit="trajectory", advantage="mc_grpo"),
    TrainerConfig(credit="trajectory", advantage="ngrpo"),
    TrainerConfig(credit="trajectory", advantage="reinforce_pp"),
    *(TrainerConfig(credit="igpo", igpo_norm=n) for n in ("joint", "separate", "per_turn_index")),
    TrainerConfig(credit="igpo", igpo_gamma=0.9),
    TrainerConfig(credit="gigpo"),
    TrainerConfig(credit="gigpo", step_std_norm=True, anchor_match_threshold=0.5),
    TrainerConfig(credit="hgpo"),
    TrainerConfig(credit="trajectory", branch_attribution="hard"),
]

TRAJECTORIES = st.tuples(
    REWARDS, st.lists(st.one_of(st.none(), st.sampled_from([-0.2, 0.0, 0.1, 0.3])), min_size=1, max_size=4)
)


@FAST
@given(st.lists(st.lists(TRAJECTORIES, min_size=1, max_size=4), min_size=1, max_size=3), st.data())
def test_infra_failures_and_unscored_trajectories_never_change_other_advantages(groups, data):
    clean, noisy = [], []
    for g, members in enumerate(groups):
        valid = [_traj(f"{g}.{i}", o, rs) for i, (o, rs) in enumerate(members)]
        broken = [
            _traj(f"{g}.x{i}", data.draw(REWARDS), rs, stop=StopReason.INFRA_ERROR)
            for i, (_, rs) in enumerate(data.draw(st.lists(TRAJECTORIES, max_size=2)))
        ]
        broken.append(_traj(f"{g}.u", None, [0.3]))  # never scored
        clean.append(TrajectoryGroup(TASK, tuple(valid)))
        noisy.append(TrajectoryGroup(TASK, tuple(broken[:1] + valid + broken[1:])))
    for config in CREDIT_CONFIGS:
        config = _no_skip(config)
        expected, _ = assign_credit(clean, config=config)
        got, _ = assign_credit(noisy, config=config)
        assert [s.advantages for s in got] == [s.advantages for s in expected], config.credit


def _no_skip(config: TrainerConfig) -> TrainerConfig:

    return dataclasses.replace(config, skip_zero_advantage_groups=False)


@FAST
@given(REWARDS, st.integers(1, 4), st.integers(1, 5))
def test_group_constant_rewards_give_zero_advantage_for_every_credit_assigner(outcome, turns, size):
    # identical trajectories whose every reward is the same value: each normalisation pool is constant (IGPO pools
    # turn rewards with outcomes); distinct observations, since GiGPO rightly grades a state revisited later
    rewards, obs = [outcome] * turns, [100 + k for k in range(turns)]
    group = TrajectoryGroup(TASK, tuple(_traj(f"r{i}", outcome, rewards, obs=obs) for i in range(size)))
    for config in CREDIT_CONFIGS:
        if config.advantage == "ngrpo" and config.credit == "trajectory":
            continue  # grades constant groups against the virtual r_max sample by design
        samples, metrics = assign_credit([group], config=_no_skip(config))
        assert all(a == 0.0 for s in samples for a in s.advantages), (config.credit, config.advantage)
        dropped, _ = assign_credit([group], config=config)
        assert dropped == []  # and the group is skipped as uninformative


@FAST
@given(st.lists(TRAJECTORIES, min_size=1, max_size=5), st.sampled_from(CREDIT_CONFIGS))
def test_policy_tokens_only_carry_advantage(members, config):
    group = TrajectoryGroup(TASK, tuple(_traj(f"r{i}", o, rs) for i, (o, rs) in enumerate(members)))
    samples, _ = assign_credit([group], config=_no_skip(config))
    for s in samples:
        assert all(a == 0.0 for a, m in zip(s.advantages, s.loss_mask, strict=True) if not m)


def test_token_advantages_put_each_turn_value_on_its_sampled_tokens_only():
    t = _traj("r", 1.0, [None, None, None])
    assert token_advantages(t, [1.0, 2.0, 3.0]) == (0, 0, 1, 1, 0, 0, 2, 2, 0, 0, 3, 3)


@FAST
@given(st.lists(st.floats(-2, 2), min_size=1, max_size=6), st.integers(0, 5), st.floats(0.0, 1.0))
def test_discounted_accumulation_respects_turn_order(values, j, gamma):
    j = j % len(values)
    mask = torch.ones(1, len(values), dtype=torch.bool)
    before = discounted_suffix_sum(torch.tensor([values], dtype=torch.float64), mask, gamma)
    bumped = list(values)
    bumped[j] += 1.0
    after = discounted_suffix_sum(torch.tensor([bumped], dtype=torch.float64), mask, gamma)
    # a reward at turn j only reaches turns k ≤ j, discounted by γ^{j−k}
    expected = torch.tensor([[gamma ** (j - k) if k <= j else 0.0 for k in range(len(values))]], dtype=torch.float64)
    torch.testing.assert_close(after - before, expected)
