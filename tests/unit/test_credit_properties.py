"""The property checklist of algorithms.md §8, asserted with hypothesis for every credit assigner, advantage
estimator, judge and reward combinator it covers (the losses' properties: `test_loss_properties.py`).

The ARPO/AEPO rollout properties (exactly k rollouts per prompt, byte-identical fork prefixes, pre-monitoring
m ∈ [1, k]) are properties of the branching rollout engine and are asserted with it: `tests/unit/test_branching.py`
and `tests/integration/test_branching_rollout.py`.
"""

from __future__ import annotations

import asyncio
import math

import pytest
import torch
from agentrl.rewards.combinators import GRAGate, ProfFilter, ResampleOnCorrect, roc_penalty
from agentrl.rewards.info_gain import InfoGain
from agentrl.rewards.judge_prm import JudgePRM
from agentrl.rewards.outcome import overlong_penalty
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentrl.config import TrainerConfig
from agentrl.credit.advantages import ADVANTAGE_ESTIMATORS, lite_ppo, mc_grpo, median_pivots, ngrpo
from agentrl.credit.assign import assign_credit
from agentrl.credit.gigpo import anchor_step_advantages, hgpo_step_advantages
from agentrl.credit.igpo import discounted_suffix_sum
from agentrl.credit.scored_turns import token_advantages
from agentrl.judge import majority
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
def test_grpo_rloo_dr_grpo_lite_ppo_sum_to_zero_per_group(data):
    rewards, index = data
    for name in ("grpo", "rloo", "dr_grpo", "lite_ppo"):
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
    import dataclasses

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


# --- IGPO -----------------------------------------------------------------------------------------------


class ProbePolicy:
    """A model double for the teacher-forced probe: P(GT | history) looked up by history length; `lead` tokens
    get arbitrary log-probs (only the GT span may count)."""

    class Tokenizer:
        def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
            return [90] if text == "<lead>" else [7, 8, 9]

    def __init__(self, probabilities: dict[int, float], lead_logprob: float = -3.0):
        self.tokenizer = self.Tokenizer()
        self.probabilities = probabilities
        self.lead_logprob = lead_logprob

    async def score_continuations(self, prefixes, continuations):
        rows = []
        for prefix, continuation in zip(prefixes, continuations, strict=True):
            lead = [self.lead_logprob] * (len(continuation) - 3)
            rows.append(lead + [math.log(self.probabilities[len(prefix)])] * 3)
        return rows


@FAST
@given(st.integers(1, 4), st.data())
def test_igpo_prob_diff_telescopes_gt_tokens_only_and_no_gain_for_the_answer_turn(tool_turns, data):
    trajectory = _traj("r", 1.0, [None] * (tool_turns + 1))
    # history lengths: prompt 2, each turn adds 2 completion + 2 observation tokens
    lengths = [2 + 4 * k for k in range(tool_turns + 1)]
    probs = {n: data.draw(st.floats(0.01, 0.99)) for n in lengths}
    values = []
    for lead, lead_logprob in (("", -3.0), ("<lead>", -3.0), ("<lead>", -0.1)):
        gains = asyncio.run(
            InfoGain("prob_diff", lead=lead).turn_values(TASK, trajectory, ProbePolicy(probs, lead_logprob))
        )
        assert gains[-1] is None
        assert sum(gains[:-1]) == pytest.approx(probs[lengths[-1]] - probs[lengths[0]], abs=1e-9)
        values.append(gains)
    assert values[0] == pytest.approx(values[1]) and values[1] == pytest.approx(values[2])


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


# --- judges and reward combinators ----------------------------------------------------------------------


@given(st.lists(st.sampled_from([-1.0, 0.0, 1.0]), min_size=1, max_size=7))
def test_openclaw_majority_of_valid_votes_tie_is_zero(votes):
    counts = {v: votes.count(v) for v in set(votes)}
    top = max(counts.values())
    winners = [v for v, c in counts.items() if c == top]
    assert majority(votes) == (winners[0] if len(winners) == 1 else 0.0)


def test_judge_prm_ignores_invalid_votes_and_masks_the_last_turn_without_next_state():
    judge = JudgePRM("m")
    assert judge.parse(r"\boxed{2}") is None and judge.parse("no box") is None
    assert judge.parse(r"\boxed{-1}") == -1.0
    t = _traj("r", 1.0, [None, None])
    assert judge.fields(task=TASK, trajectory=t, turn=t.turns[-1]) is None
    assert judge.fields(task=TASK, trajectory=t, turn=t.turns[0]) is not None
    single = _traj("s", 1.0, [None])
    assert judge.fields(task=TASK, trajectory=single, turn=single.turns[0]) is not None


OUTCOME_GROUP = st.lists(st.tuples(st.sampled_from([0.0, 1.0]), st.lists(st.floats(0, 1), min_size=2, max_size=4)))


@FAST
@given(OUTCOME_GROUP.filter(lambda g: len(g) > 4))
def test_prof_keeps_n_minus_k_removing_lowest_consistency_positives_and_most_supported_negatives(members):
    rollouts = tuple(_traj(f"r{i}", o, list(ps)) for i, (o, ps) in enumerate(members))
    prof = ProfFilter(keep=4)
    (kept,) = prof([TrajectoryGroup(TASK, rollouts)])
    assert len(kept.trajectories) == 4
    steps = [p for t in rollouts for p in prof.step_scores(t)]
    p_bar = sum(steps) / len(steps)
    kept_ids = {t.trajectory_id for t in kept.trajectories}
    for sign in (1.0, 0.0):
        same = [t for t in rollouts if t.reward == sign]
        kept_scores = [prof.consistency(t, p_bar) for t in same if t.trajectory_id in kept_ids]
        gone_scores = [prof.consistency(t, p_bar) for t in same if t.trajectory_id not in kept_ids]
        if kept_scores and gone_scores:
            assert max(gone_scores) <= min(kept_scores)


@FAST
@given(st.lists(st.tuples(st.sampled_from([0.0, 1.0]), st.integers(0, 3)), min_size=1, max_size=24), st.integers(4, 12))
def test_roc_group_size_minimums_and_clean_positives(members, target):
    rollouts = tuple(
        _traj(f"r{i:02d}", o, [None] * 2, obs=None) if errors == 0 else _erroring(f"r{i:02d}", o, errors)
        for i, (o, errors) in enumerate(members)
    )
    (kept,) = ResampleOnCorrect(target=target)([TrajectoryGroup(TASK, rollouts)])
    n_pos = sum(t.reward == 1.0 for t in rollouts)
    n_neg = len(rollouts) - n_pos
    pos = [t for t in kept.trajectories if t.reward == 1.0]
    neg = [t for t in kept.trajectories if t.reward == 0.0]
    assert len(kept.trajectories) == min(target, len(rollouts))
    if len(rollouts) > target:
        assert len(pos) >= min(2, n_pos) and len(neg) >= min(2, n_neg)
        dropped = [t for t in rollouts if t.reward == 1.0 and t not in pos]
        if pos and dropped:
            assert max(map(roc_penalty, pos)) <= min(map(roc_penalty, dropped))


def _erroring(tid: str, outcome: float, errors: int) -> Trajectory:
    t = _traj(tid, outcome, [None] * 2)
    bad = tuple(ToolResult(f"e{i}", "boom", is_error=True, error_type="failed") for i in range(errors))
    first = Turn(**{**t.turns[0].__dict__, "tool_results": t.turns[0].tool_results + bad})
    return Trajectory(**{**t.__dict__, "turns": (first, *t.turns[1:])})


@FAST
@given(st.floats(-1, 2), st.floats(0, 1.5), st.lists(st.floats(-1, 1), min_size=1, max_size=4))
def test_gra_dense_sum_counts_iff_outcome_clears_the_gate(outcome, threshold, dense):
    t = _traj("r", outcome, list(dense))
    (group,) = GRAGate(threshold=threshold)([TrajectoryGroup(TASK, (t,))])
    gated = group.trajectories[0]
    counted = [turn.reward for turn in gated.turns if turn.reward is not None]
    assert (counted == list(dense)) if outcome >= threshold else (counted == [])


@given(st.integers(0, 400), st.integers(1, 100), st.floats(0.1, 2.0))
def test_overlong_shaping_zero_then_linear_to_minus_f(sampled, buffer, factor):
    max_tokens = 200
    penalty = overlong_penalty(max_tokens, buffer, factor=factor)
    turns = (Turn(tuple(range(sampled)), (0.0,) * sampled, (0.0,) * sampled, ""),)
    t = Trajectory("t", "g", "r", (0,), turns, StopReason.ANSWERED)
    value = penalty.fn(trajectory=t)
    if sampled <= max_tokens - buffer:
        assert value == 0.0
    else:
        assert value == pytest.approx(-(sampled - (max_tokens - buffer)) / buffer * factor)
    if sampled == max_tokens:
        assert value == pytest.approx(-factor)
