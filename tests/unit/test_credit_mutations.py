"""The mutation matrix of credit assignment: every registered advantage estimator, credit scheme and branch
attribution against values worked out by hand from its paper's definition (small inputs, the arithmetic in the
comments), and proof that these checks catch a wrong implementation: each registry entry swapped for every other
one, HGPO replaced by a scaled single-level formula, and hard attribution zeroed or reduced to re-weighting.
"""

from __future__ import annotations

import math

import pytest
import torch

import agentrl.credit.assign as assign_module
import agentrl.credit.branches as branches_module
import agentrl.credit.gigpo as gigpo_module
from agentrl.config import TrainerConfig
from agentrl.credit.advantages import ADVANTAGE_ESTIMATORS
from agentrl.credit.assign import assign_credit
from agentrl.registry import CREDIT, resolve
from agentrl.types import StopReason, Task, Trajectory, TrajectoryGroup, Turn

pytestmark = pytest.mark.unit

TASK = Task("t", "?", answer="42")
R2 = math.sqrt(2)
CLOSE = dict(abs=1e-5)  # the estimators' eps = 1e-6 in their std, and float32 advantages

# --- advantage estimators: one batch, groups [1, 0, 0] and [3, 1] ---------------------------------------------

REWARDS_B = torch.tensor([1.0, 0.0, 0.0, 3.0, 1.0], dtype=torch.float64)
GROUP_B = torch.tensor([0, 0, 0, 1, 1])
CENTRED = [2 / 3, -1 / 3, -1 / 3, 1.0, -1.0]  # r − group mean: means 1/3 and 2
EXPECTED_ADVANTAGES = {
    # group std (population): √(((2/3)² + 2·(1/3)²)/3) = √2/3 and 1
    "grpo": [R2, -1 / R2, -1 / R2, 1.0, -1.0],
    "dr_grpo": CENTRED,
    # r_i − mean of the others: 1 − 0, 0 − ½, 0 − ½; 3 − 1, 1 − 3
    "rloo": [1.0, -0.5, -0.5, 2.0, -2.0],
    # batch std of the raw rewards [1, 0, 0, 3, 1]: mean 1, variance (0 + 1 + 1 + 4 + 0)/5 = 6/5
    "lite_ppo": [c / math.sqrt(6 / 5) for c in CENTRED],
    # with the virtual r_max = 1: [1, 0, 0, 1] → mean ½, std ½; [3, 1, 1] → mean 5/3, std √(8/9)
    "ngrpo": [1.0, -1.0, -1.0, (4 / 3) / math.sqrt(8 / 9), (-2 / 3) / math.sqrt(8 / 9)],
    # median baselines 0 and (3 + 1)/2 = 2, group std √2/3 and 1: 1/(√2/3) = 3/√2
    "mc_grpo": [3 / R2, 0.0, 0.0, 1.0, -1.0],
    # the centred values over the whole batch: mean 0, std √((4/9 + 1/9 + 1/9 + 1 + 1)/5) = √(8/15)
    "reinforce_pp": [c / math.sqrt(8 / 15) for c in CENTRED],
}


def check_estimator(name: str) -> None:
    advantages = resolve("advantage", name)(REWARDS_B, GROUP_B)
    assert advantages.tolist() == pytest.approx(EXPECTED_ADVANTAGES[name], **CLOSE), name


def check_ngrpo_r_max_from_config() -> None:
    # r_max = 3: [1, 0, 0, 3] → mean 1, variance 6/4; [3, 1, 3] → mean 7/3, variance 8/9
    group_a = [_rollout(f"a{i}", [(5,)], r) for i, r in enumerate([1.0, 0.0, 0.0])]
    group_b = [_rollout(f"b{i}", [(5,)], r) for i, r in enumerate([3.0, 1.0])]
    config = TrainerConfig(advantage="ngrpo", ngrpo_r_max=3.0, skip_zero_advantage_groups=False)
    groups = [TrajectoryGroup(TASK, tuple(group_a)), TrajectoryGroup(TASK, tuple(group_b))]
    samples, _ = assign_credit(groups, config=config)
    expected = [0.0, -1 / math.sqrt(1.5), -1 / math.sqrt(1.5), (2 / 3) / math.sqrt(8 / 9), (-4 / 3) / math.sqrt(8 / 9)]
    assert [s.advantages[1] for s in samples] == pytest.approx(expected, **CLOSE)


# --- credit schemes ----------------------------------------------------------------------------------------------


def _rollout(tid: str, observations: list[tuple[int, ...]], outcome: float, turn_rewards=None, **kw) -> Trajectory:
    """Prompt (0,); one tool turn per observation (2 sampled tokens, then the observation), then an answer turn
    (1 sampled token). `turn_rewards`: one value (or None) per turn."""
    rewards = turn_rewards or [None] * (len(observations) + 1)
    turns = [Turn((20, 21), (-0.5, -0.5), (1.0, 1.0), "", observation_ids=obs) for obs in observations]
    turns.append(Turn((30,), (-0.5,), (1.0,), ""))
    turns = [Turn(**{**t.__dict__, "reward": r}) for t, r in zip(turns, rewards, strict=True)]
    return Trajectory("t", "g", tid, (0,), tuple(turns), StopReason.ANSWERED, reward=outcome, **kw)


def _turn_advantages(config: TrainerConfig, trajectories: list[Trajectory]) -> list[list[float]]:
    """The advantage on each turn's first sampled token, per trajectory."""
    samples, _ = assign_credit([TrajectoryGroup(TASK, tuple(trajectories))], config=config)
    out = []
    for sample, trajectory in zip(samples, trajectories, strict=True):
        at, values = len(trajectory.prompt_ids), []
        for turn in trajectory.turns:
            values.append(sample.advantages[at])
            at += len(turn.completion_ids) + len(turn.observation_ids)
        out.append(values)
    return out


def xyz(turn_rewards: bool = False) -> list[Trajectory]:
    """Three rollouts that all reach observation (9,) at turn 2, X and Z through (1,), Y through (2,); X succeeds.
    With `turn_rewards`, X's first turn carries a turn reward of 0.5."""
    return [
        _rollout("X", [(1,), (9,)], 1.0, [0.5, None, None] if turn_rewards else None),
        _rollout("Y", [(2,), (9,)], 0.0),
        _rollout("Z", [(1,), (9,)], 0.0),
    ]


def check_trajectory_credit() -> None:
    # GRPO on the outcomes [1, 0, 0] (turn rewards play no part): ±(·)/(√2/3) on every turn
    got = _turn_advantages(TrainerConfig(credit="trajectory", advantage="grpo"), xyz(turn_rewards=True))
    assert got == [pytest.approx([R2] * 3, **CLOSE), pytest.approx([-1 / R2] * 3, **CLOSE)] + [
        pytest.approx([-1 / R2] * 3, **CLOSE)
    ]


def check_igpo_credit() -> None:
    # algorithms.md §7.3 with the turn rewards given: r = [0.20, 0.40, 1.0] and [−0.05, 0.01, 0.0]; pool of six:
    # μ = 1.56/6 = 0.26, σ = √(0.797/6) = 0.364463; z = (r − μ)/σ, then suffix sums (γ = 1)
    one = _rollout("r1", [(2, 2), (2, 2)], 1.0, [0.20, 0.40, None])
    two = _rollout("r2", [(2, 2), (2, 2)], 0.0, [-0.05, 0.01, None])
    got = _turn_advantages(TrainerConfig(credit="igpo", igpo_norm="joint", igpo_gamma=1.0), [one, two])
    expected = [[2.2499, 2.4145, 2.0304], [-2.2499, -1.3993, -0.7134]]
    assert got == [pytest.approx(row, abs=1e-3) for row in expected]


# Episode advantage (GiGPO mean_norm = r − mean): X 2/3, Y −1/3, Z −1/3. Step returns with γ = 1 equal the
# outcomes. Step groups by the observation acted on: turn 0 (the prompt) {X, Y, Z}: [2/3, −1/3, −1/3];
# turn 1: {X, Z} on (1,): ±½, Y alone on (2,): 0; turn 2: {X, Y, Z} on (9,): [2/3, −1/3, −1/3].
GIGPO_XYZ = [[2 / 3 + 2 / 3, 2 / 3 + 1 / 2, 2 / 3 + 2 / 3], [-2 / 3, -1 / 3, -2 / 3], [-2 / 3, -1 / 3 - 1 / 2, -2 / 3]]
# HGPO, K = 1, α = 1 (w₀ = 1, w₁ = 2): at turn 2 the history splits {X, Y, Z} into {X, Z} (came from (1,)) and
# {Y} (alone): X (1·2/3 + 2·½)/3 = 5/9, Z (1·(−1/3) + 2·(−½))/3 = −4/9, Y only level 0: −1/3. Turns 0 and 1 have
# the same subgroups at both levels, so their step advantages stay those of GiGPO.
HGPO_XYZ = [[4 / 3, 7 / 6, 2 / 3 + 5 / 9], [-2 / 3, -1 / 3, -1 / 3 - 1 / 3], [-2 / 3, -5 / 6, -1 / 3 - 4 / 9]]


def check_gigpo_credit() -> None:
    config = TrainerConfig(credit="gigpo", step_gamma=1.0, step_advantage_weight=1.0)
    assert _turn_advantages(config, xyz()) == [pytest.approx(row, **CLOSE) for row in GIGPO_XYZ]


def check_hgpo_credit() -> None:
    config = TrainerConfig(credit="hgpo", step_gamma=1.0, hgpo_history_turns=1, hgpo_alpha=1.0)
    assert _turn_advantages(config, xyz()) == [pytest.approx(row, **CLOSE) for row in HGPO_XYZ]


# --- branch attribution -------------------------------------------------------------------------------------------


def forked() -> list[Trajectory]:
    """P (outcome 1); B forked from P after P's turn 0 (outcome 0); C on its own (outcome 0). GRPO over [1, 0, 0]:
    A_P = √2, A_B = A_C = −1/√2."""
    p = _rollout("P", [(5,)], 1.0)
    b = _rollout("B", [(6,)], 0.0, parent_id="P", branch_turn=1)
    b = Trajectory(**{**b.__dict__, "turns": (p.turns[0], Turn((40,), (-0.5,), (1.0,), ""))})
    return [p, b, _rollout("C", [(7,)], 0.0)]


def _attributed(mode: str) -> list[tuple[list[float], list[bool]]]:
    """Per trajectory, (advantage, in the loss) of each turn's first sampled token."""
    trajectories = forked()
    config = TrainerConfig(branch_attribution=mode)
    samples, _ = assign_credit([TrajectoryGroup(TASK, tuple(trajectories))], config=config)
    out = []
    for sample, trajectory in zip(samples, trajectories, strict=True):
        at, row = len(trajectory.prompt_ids), ([], [])
        for turn in trajectory.turns:
            row[0].append(sample.advantages[at])
            row[1].append(sample.loss_mask[at])
            at += len(turn.completion_ids) + len(turn.observation_ids)
        out.append(row)
    return out


def check_soft_attribution() -> None:
    (p, p_in), (b, b_in), (c, c_in) = _attributed("soft")
    assert p == pytest.approx([R2, R2], **CLOSE) and b == pytest.approx([-1 / R2] * 2, **CLOSE)
    assert p_in == b_in == c_in == [True, True]  # both copies of P's turn 0 train: Σ A = √2 − 1/√2 = 1/√2 on it


def check_hard_attribution() -> None:
    (p, p_in), (b, b_in), (c, c_in) = _attributed("hard")
    # the shared turn trains once, in P (which sampled it), with the mean (√2 − 1/√2)/2 = 1/(2√2)
    assert p == pytest.approx([1 / (2 * R2), R2], **CLOSE) and p_in == [True, True]
    assert b_in == [False, True] and b[1] == pytest.approx(-1 / R2, **CLOSE)
    assert c == pytest.approx([-1 / R2] * 2, **CLOSE) and c_in == [True, True]


ESTIMATOR_CHECKS = {name: (lambda name=name: check_estimator(name)) for name in EXPECTED_ADVANTAGES}
CREDIT_CHECKS = {
    "trajectory": check_trajectory_credit,
    "igpo": check_igpo_credit,
    "gigpo": check_gigpo_credit,
    "hgpo": check_hgpo_credit,
}
ATTRIBUTION_CHECKS = {"soft": check_soft_attribution, "hard": check_hard_attribution}
ALL_CHECKS = {
    **{f"advantage/{k}": v for k, v in ESTIMATOR_CHECKS.items()},
    "advantage/ngrpo_r_max": check_ngrpo_r_max_from_config,
    **{f"credit/{k}": v for k, v in CREDIT_CHECKS.items()},
    **{f"attribution/{k}": v for k, v in ATTRIBUTION_CHECKS.items()},
}


def failing_checks() -> list[str]:
    failed = []
    for name, check in ALL_CHECKS.items():
        try:
            check()
        except Exception:  # a wrong value, or a wrong shape (a mutation that drops a sample, say)
            failed.append(name)
    return failed


# --- the matrix ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(ALL_CHECKS))
def test_hand_computed_values(name):
    ALL_CHECKS[name]()


def test_every_registered_estimator_scheme_and_attribution_has_a_hand_computed_check():
    assert set(ADVANTAGE_ESTIMATORS) == set(ESTIMATOR_CHECKS)
    assert set(CREDIT) == set(CREDIT_CHECKS)
    assert set(branches_module.ATTRIBUTION_MODES) == set(ATTRIBUTION_CHECKS)


def _pairs(names):
    return [(a, b) for a in sorted(names) for b in sorted(names) if a != b]


@pytest.mark.parametrize(("name", "impostor"), _pairs(EXPECTED_ADVANTAGES))
def test_an_estimator_swapped_for_another_fails_a_check(name, impostor, monkeypatch):
    monkeypatch.setitem(ADVANTAGE_ESTIMATORS, name, dict(ADVANTAGE_ESTIMATORS)[impostor])
    assert f"advantage/{name}" in failing_checks()


@pytest.mark.parametrize(("name", "impostor"), _pairs(CREDIT_CHECKS))
def test_a_credit_scheme_swapped_for_another_fails_a_check(name, impostor, monkeypatch):
    monkeypatch.setitem(CREDIT, name, CREDIT[impostor])
    assert f"credit/{name}" in failing_checks()


@pytest.mark.parametrize(("name", "impostor"), _pairs(ATTRIBUTION_CHECKS))
def test_an_attribution_swapped_for_another_fails_a_check(name, impostor, monkeypatch):
    original = branches_module.attribute_branches

    def swapped(trajectories, advantages_B_K, turn_mask_B_K, mode, keep_B=None):
        return original(trajectories, advantages_B_K, turn_mask_B_K, impostor if mode == name else mode, keep_B)

    monkeypatch.setattr(assign_module, "attribute_branches", swapped)
    assert f"attribution/{name}" in failing_checks()


@pytest.mark.parametrize("level", [0, 1])
@pytest.mark.parametrize("scale", [0.5, 1.0, 1.5, 2.0, 2 / 3, 4 / 3])
def test_hgpo_replaced_by_a_scaled_single_level_formula_fails(level, scale, monkeypatch):
    def single_level(returns_N, level_clusters_L_N, *, alpha=1.0, std_norm=False, eps=1e-6):
        return scale * gigpo_module.anchor_step_advantages(returns_N, level_clusters_L_N[level], std_norm=std_norm)

    monkeypatch.setattr(gigpo_module, "hgpo_step_advantages", single_level)
    assert "credit/hgpo" in failing_checks()


def test_hgpo_with_unweighted_levels_fails(monkeypatch):
    original = gigpo_module.hgpo_step_advantages
    monkeypatch.setattr(gigpo_module, "hgpo_step_advantages", lambda r, c, **kw: original(r, c, **{**kw, "alpha": 0.0}))
    assert failing_checks() == ["credit/hgpo"]  # (2/3 + ½)/2 = 7/12 where the weighted mean is 5/9


def test_hard_attribution_zeroing_the_advantages_fails(monkeypatch):
    original = branches_module.hard_attribution

    def zeroed(advantages_N, shared_id_N, kept_N, sampled_N):
        mean_N, trains_N = original(advantages_N, shared_id_N, kept_N, sampled_N)
        return torch.zeros_like(mean_N), trains_N

    monkeypatch.setattr(branches_module, "hard_attribution", zeroed)
    assert failing_checks() == ["attribution/hard"]


def test_hard_attribution_that_only_reweights_the_copies_fails(monkeypatch):
    # the reviewed no-op: every copy keeps training with the mean, which under token-mean sums back to soft
    original = branches_module.hard_attribution
    monkeypatch.setattr(
        branches_module, "hard_attribution", lambda a, ids, kept, sampled: (original(a, ids, kept, sampled)[0], kept)
    )
    assert failing_checks() == ["attribution/hard"]


def test_the_unmutated_code_passes_every_check():
    assert failing_checks() == []
