"""The worked examples of algorithms.md §7, reproduced through the public functions with the numbers given there.

§7.1 (ARPO/AEPO branch probabilities) is a rule of the branching rollout engine; its worked example is in
`tests/unit/test_branching.py`.
"""

from __future__ import annotations

import asyncio
import math

import pytest
import torch
from agentrl.rewards.combinators import (
    DynamicSampling,
    ProfFilter,
    ResampleOnCorrect,
    prof_removal_counts,
    roc_counts,
)
from agentrl.rewards.info_gain import InfoGain

from agentrl.config import TrainerConfig
from agentrl.credit.assign import assign_credit
from agentrl.credit.gigpo import gigpo_credit
from agentrl.credit.scored_turns import ScoredTurns
from agentrl.reward import RewardStack, reward
from agentrl.train.losses import aepo_loss, ppo_clip_loss
from agentrl.types import StopReason, Task, ToolCall, ToolResult, Trajectory, TrajectoryGroup, Turn

pytestmark = pytest.mark.unit

TASK = Task("t", "?", answer="Paris")


def tool_turn(obs: tuple[int, ...], *, reward=None, error=False) -> Turn:
    result = ToolResult("c", "boom" if error else "ok", is_error=error, error_type="failed" if error else None)
    return Turn(
        (1,),
        (-0.5,),
        (1.0,),
        "",
        tool_calls=(ToolCall("c", "search", {}),),
        tool_results=(result,),
        observation_ids=obs,
        reward=reward,
        reward_components={} if reward is None else {"prm": reward},
    )


def answer_turn() -> Turn:
    return Turn((3,), (-0.5,), (1.0,), "")


def trajectory(tid: str, turns, *, prompt=(0,), outcome=None, stop=StopReason.ANSWERED) -> Trajectory:
    components = {} if outcome is None else {"outcome": outcome}
    return Trajectory("t", "g", tid, prompt, tuple(turns), stop, reward=outcome, reward_components=components)


# --- §7.2 AEPO upper-clip gradient -----------------------------------------------------------------------


def _grad(loss_fn, advantage: float, ratio: float, **kw) -> tuple[float, float]:
    logp = torch.zeros(1, 1, requires_grad=True)
    old = torch.full((1, 1), -math.log(ratio))
    loss, _ = loss_fn(logp, old, torch.full((1, 1), advantage), clip_low=0.2, clip_high=0.2, **kw)
    loss.sum().backward()
    return float(loss.detach()), float(logp.grad)


def test_7_2_aepo_keeps_a_capped_gradient_where_ppo_clips():
    # A = +1, ρ = 1.5, ε_high = 0.2: PPO gradient 0, AEPO −1.2·∇logπ, unclipped REINFORCE-with-ratio −1.5·∇logπ
    ppo_value, ppo_grad = _grad(ppo_clip_loss, +1.0, 1.5, dual_clip=3.0)
    aepo_value, aepo_grad = _grad(aepo_loss, +1.0, 1.5, dual_clip=3.0)
    assert ppo_grad == 0.0
    assert aepo_grad == pytest.approx(-1.2)
    assert ppo_value == pytest.approx(-1.2) and aepo_value == pytest.approx(-1.2)
    # with no clipping at all (huge ε_high) the gradient is −ρ·A = −1.5
    logp = torch.zeros(1, 1, requires_grad=True)
    loss, _ = ppo_clip_loss(
        logp, torch.full((1, 1), -math.log(1.5)), torch.ones(1, 1), clip_low=0.2, clip_high=10.0, dual_clip=3.0
    )
    loss.sum().backward()
    assert float(logp.grad) == pytest.approx(-1.5)


def test_7_2_negative_advantage_uses_the_unclipped_branch_and_dual_clip_caps_at_c_times_abs_a():
    for loss_fn in (ppo_clip_loss, aepo_loss):
        value, grad = _grad(loss_fn, -1.0, 1.5, dual_clip=3.0)
        assert value == pytest.approx(1.5) and grad == pytest.approx(1.5)
        # far off-policy (ρ = 5): the loss would be 5, dual clip caps it at c·|A| = 3 with zero gradient
        value, grad = _grad(loss_fn, -1.0, 5.0, dual_clip=3.0)
        assert value == pytest.approx(3.0) and grad == 0.0


# --- §7.3 IGPO joint normalisation and accumulation -------------------------------------------------------


class ProbePolicy:
    """A model double: P(GT | history) scripted per (rollout prompt, history length) for the IG probe."""

    class Tokenizer:
        def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
            return [7, 8]  # a two-token ground-truth answer

    def __init__(self, probabilities: dict[tuple[int, int], float]):
        self.tokenizer = self.Tokenizer()
        self.probabilities = probabilities

    async def score_continuations(self, prefixes, continuations):
        # every GT token gets log P, so the probe's mean log-prob is log P and its geometric mean P
        return [
            [math.log(self.probabilities[(p[0], len(p))])] * len(c)
            for p, c in zip(prefixes, continuations, strict=True)
        ]


def test_7_3_igpo_joint_normalisation_and_accumulation_end_to_end():
    # histories: prompt (len 1), + turn 0 and its 2 observation tokens (len 4), + turn 1 (len 7);
    # rollout 1 has prompt 10, rollout 2 prompt 20
    policy = ProbePolicy({(10, 1): 0.10, (10, 4): 0.30, (10, 7): 0.70, (20, 1): 0.10, (20, 4): 0.05, (20, 7): 0.06})
    f1 = {"r1": 1.0, "r2": 0.0}

    @reward
    def outcome(trajectory):
        return f1[trajectory.trajectory_id]

    stack = RewardStack([(outcome, 1.0), (InfoGain("prob_diff"), 1.0)])
    raw = [
        trajectory(tid, [tool_turn((2, 2)), tool_turn((2, 2)), answer_turn()], prompt=(p,))
        for tid, p in (("r1", 10), ("r2", 20))
    ]
    scored = asyncio.run(_score_all(stack, raw, policy))
    # r = [0.20, 0.40, 1.0] and [−0.05, 0.01, 0.0]: turn rewards are the IGs, the outcome lands on the last turn
    assert [t.reward for t in scored[0].turns[:2]] == pytest.approx([0.20, 0.40])
    assert [t.reward for t in scored[1].turns[:2]] == pytest.approx([-0.05, 0.01])
    assert scored[0].turns[2].reward is None  # no IG for the answer turn

    config = TrainerConfig(credit="igpo", igpo_gamma=1.0, igpo_norm="joint")
    samples, metrics = assign_credit([TrajectoryGroup(TASK, tuple(scored))], config=config)
    # pool μ = 0.26, σ = 0.3645; z₁ = [−0.165, 0.384, 2.030], z₂ = [−0.851, −0.686, −0.713]; suffix sums:
    expected = {0: [2.250, 2.415, 2.030], 1: [-2.250, -1.399, -0.713]}
    for b, sample in enumerate(samples):
        # token layout: prompt, (turn 0 token, 2 observation tokens), (turn 1 token, 2 obs), answer token
        turn_values = [sample.advantages[1], sample.advantages[4], sample.advantages[7]]
        assert turn_values == pytest.approx(expected[b], abs=1e-3)
        # prompt and tool-output tokens carry nothing
        assert [sample.advantages[i] for i in (0, 2, 3, 5, 6)] == [0.0] * 5
    assert metrics["credit/igpo_outcome_only"] == 0.0


async def _score_all(stack, trajectories, policy):
    return list(await asyncio.gather(*(stack.score(TASK, t, policy=policy) for t in trajectories)))


# --- §7.4 PROF removal counts ------------------------------------------------------------------------------


@pytest.mark.parametrize(("pos", "neg", "removed"), [(6, 2, (4, 0)), (2, 6, (0, 4)), (4, 4, (2, 2)), (5, 3, (3, 1))])
def test_7_4_prof_removal_counts_keep_two_and_two(pos, neg, removed):
    assert prof_removal_counts(pos, neg, 4) == removed
    assert (pos - removed[0], neg - removed[1]) == (2, 2)


def test_7_4_bankers_rounding_and_which_rollouts_go():
    # Δ = 1: k_pos = round((1 + 4) / 2) = round(2.5) = 2 (banker's rounding), not 3
    assert prof_removal_counts(5, 4, 4)[0] == 2
    # 2 pos / 6 neg: the 4 removed negatives are those with the highest PRM support (lowest consistency)
    neg_scores = [0.9, 0.1, 0.8, 0.2, 0.7, 0.3]
    rollouts = [
        trajectory(f"p{i}", [tool_turn((2,), reward=0.5), tool_turn((2,), reward=0.5)], outcome=1.0) for i in range(2)
    ]
    rollouts += [
        trajectory(f"n{i}", [tool_turn((2,), reward=s), tool_turn((2,), reward=s)], outcome=0.0)
        for i, s in enumerate(neg_scores)
    ]
    (kept,) = ProfFilter(keep=4)([TrajectoryGroup(TASK, tuple(rollouts))])
    assert sorted(t.trajectory_id for t in kept.trajectories) == ["n1", "n3", "p0", "p1"]


# --- §7.5 GRPO-RoC down-sampling ---------------------------------------------------------------------------


def test_7_5_roc_counts():
    assert roc_counts(20, 12, 16) == (10, 6)
    assert roc_counts(30, 2, 16) == (14, 2)  # n_neg = round(1) = 1 < 2 → 2


def test_7_5_roc_keeps_the_cleanest_positives_and_equal_reward_groups_go_earlier():
    # 20 positives with 0..19 erroring tool calls out of 20, 12 negatives: keep the 10 cleanest positives
    positives = [
        trajectory(f"p{i:02d}", [tool_turn((2,), error=j < i) for j in range(20)] + [answer_turn()], outcome=1.0)
        for i in range(20)
    ]
    negatives = [trajectory(f"n{i:02d}", [answer_turn()], outcome=0.0) for i in range(12)]
    group = TrajectoryGroup(TASK, tuple(positives[::-1] + negatives))
    (kept,) = ResampleOnCorrect(target=16)([group])
    ids = sorted(t.trajectory_id for t in kept.trajectories)
    assert ids == [f"n{i:02d}" for i in range(6)] + [f"p{i:02d}" for i in range(10)]
    # 32 / 0: removed by dynamic sampling (rStar's reject_equal_reward) before down-sampling
    all_correct = TrajectoryGroup(TASK, tuple(positives + positives[:12]))
    assert DynamicSampling()([all_correct]) == []


# --- §7.6 GiGPO anchor step --------------------------------------------------------------------------------


def test_7_6_gigpo_anchor_step_advantage():
    # both rollouts reach observation s = (5,) after turn 0; from s rollout A succeeds two steps later
    # (return at s: 0.95² · 1 = 0.9025), rollout B never does (return 0)
    a = trajectory("A", [tool_turn((5,)), tool_turn((6,)), tool_turn((7,)), answer_turn()], outcome=1.0)
    b = trajectory("B", [tool_turn((5,)), tool_turn((8,)), answer_turn()], outcome=0.0)
    batch = ScoredTurns.from_groups([TrajectoryGroup(TASK, (a, b))])
    config = TrainerConfig(credit="gigpo", step_gamma=0.95, step_std_norm=False, step_advantage_weight=1.0)
    advantages_B_K, _ = gigpo_credit(batch, config)
    # episode advantages ±0.5 (mean_norm), step advantages at s ±0.451
    assert float(advantages_B_K[0, 1]) == pytest.approx(0.5 + 0.45125, abs=1e-6)
    assert float(advantages_B_K[1, 1]) == pytest.approx(-0.5 - 0.45125, abs=1e-6)
