"""Reward combinators: the §7.4 / §7.5 worked examples and the §8 properties of PROF, GRPO-RoC, G-RA and dynamic
sampling, plus weighted sums with metric-only components."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from agentrl.rewards.combinators import (
    DynamicSampling,
    GRAGate,
    ProfFilter,
    ResampleOnCorrect,
    prof_removal_counts,
    roc_counts,
    roc_penalty,
)

from agentrl.reward import RewardStack, apply_filters, component_metrics, reward
from agentrl.types import StopReason, Task, ToolCall, ToolResult, Trajectory, TrajectoryGroup, Turn

pytestmark = pytest.mark.unit

TASK = Task("t", "?", answer="42")


def turn(*, reward=None, errors=0, ok=1, parse_error=None, tool=True) -> Turn:
    results = tuple(ToolResult(f"e{i}", "boom", is_error=True, error_type="failed") for i in range(errors))
    results += tuple(ToolResult(f"o{i}", "fine") for i in range(ok))
    calls = tuple(ToolCall(r.call_id, "f", {}) for r in results) if tool else ()
    return Turn(
        (1,),
        (0.0,),
        (0.0,),
        "",
        tool_calls=calls,
        tool_results=results if tool else (),
        parse_error=parse_error,
        reward=reward,
        reward_components={} if reward is None else {"prm": reward},
    )


def traj(
    i, outcome, turn_rewards=(), *, errors=0, stop=StopReason.ANSWERED, answer="42", parse_error=None
) -> Trajectory:
    turns = tuple(turn(reward=r, errors=errors, parse_error=parse_error) for r in turn_rewards) or (
        turn(errors=errors),
    )
    return Trajectory(
        "t",
        "g",
        f"r{i}",
        (0,),
        turns,
        stop_reason=stop,
        reward=None if stop == StopReason.INFRA_ERROR else outcome,
        reward_components={"exact_match": outcome},
        answer=answer,
    )


def ids(groups):
    return [t.trajectory_id for g in groups for t in g.trajectories]


# --- weighted sum ----------------------------------------------------------------------------------------------


def test_weighted_sum_keeps_metric_only_components_and_logs_each():
    @reward
    def one(task) -> float:
        return 1.0

    @reward
    def half(task) -> float:
        return 0.5

    @reward(level="turn")
    def judged(turn_index) -> float | None:
        return None if turn_index == 0 else 2.0

    stack = RewardStack([(one, 2.0), (half, 0.0), (judged, 0.5)])
    measured = dataclasses.replace(traj(0, 0.0, (None, None)), measurements={"check": 1.0})
    scored = asyncio.run(stack.score(TASK, measured))
    assert scored.reward == 2.0 and scored.reward_components == {"one": 1.0, "half": 0.5}
    assert [t.reward for t in scored.turns] == [None, 1.0]
    assert scored.measurements == {"check": 1.0}  # scoring keeps the scaffold's measurements
    metrics = component_metrics([TrajectoryGroup(TASK, (scored,))])
    assert metrics["reward/half"] == 0.5 and metrics["reward/turn/judged"] == 2.0
    assert metrics["reward/turn/judged/scored"] == 0.5 and metrics["measure/check"] == 1.0
    infra = asyncio.run(stack.score(TASK, traj(1, 0.0, stop=StopReason.INFRA_ERROR)))
    assert infra.reward is None  # infrastructure failures are never scored


def test_when_every_weighted_reward_abstains_the_trajectory_is_unscored_and_left_out_of_credit():
    from agentrl.credit.assign import assign_credit

    @reward
    def checked(trajectory) -> float | None:  # abstains on r2: say its checker could not run
        return {"r0": 1.0, "r1": 0.0, "r3": 0.0}.get(trajectory.trajectory_id)

    @reward
    def length(trajectory) -> float:  # a metric only (weight 0): its value does not make r2 scored
        return 3.0

    stack = RewardStack([(checked, 1.0), (length, 0.0)])
    raw = [traj(i, 0.0) for i in range(4)]
    scored, _ = asyncio.run(stack.score_batch([(TASK, t) for t in raw]))
    assert [t.reward for t in scored] == [1.0, 0.0, None, 0.0]  # not 0.0: no score is not a score of 0
    assert scored[2].reward_components == {"length": 3.0}
    assert component_metrics([TrajectoryGroup(TASK, tuple(scored))])["reward/abstained"] == 1.0
    # credit sees the group as [1, 0, 0] (GRPO: √2, −1/√2, −1/√2), exactly as if r2 had never been sampled
    samples, metrics = assign_credit([TrajectoryGroup(TASK, tuple(scored))])
    assert metrics["credit/trajectories"] == 3.0
    assert [s.advantages[1] for s in samples] == pytest.approx([2**0.5, -(0.5**0.5), -(0.5**0.5)], abs=1e-5)

    # a stack of turn-level rewards alone trains no outcome: every trajectory gets 0.0, none abstains
    @reward(level="turn")
    def judged(turn_index) -> float | None:
        return None

    only_turns, _ = asyncio.run(RewardStack([(judged, 1.0)]).score_batch([(TASK, raw[0])]))
    assert only_turns[0].reward == 0.0 and only_turns[0].turns[0].reward is None


# --- PROF --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("pos", "neg", "expected"), [(6, 2, (4, 0)), (2, 6, (0, 4)), (4, 4, (2, 2)), (5, 3, (3, 1))])
def test_prof_removal_counts_worked_example_7_4(pos, neg, expected):
    assert prof_removal_counts(pos, neg, 4) == expected
    k_pos, k_neg = expected
    assert (pos - k_pos, neg - k_neg) == (2, 2)


def test_prof_banker_rounding_and_caps():
    assert prof_removal_counts(5, 4, 4) == (2, 2)  # Δ = 1 → round(2.5) = 2
    assert prof_removal_counts(8, 0, 4) == (4, 0)
    assert prof_removal_counts(1, 7, 4) == (0, 4)


def test_prof_keeps_consistent_rollouts():
    # 6 positives with process scores 0.1 … 0.6, 2 negatives with 0.9 (PRM likes them) and 0.0 (PRM agrees)
    pos = [traj(i, 1.0, (s, s)) for i, s in enumerate([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])]
    neg = [traj(6, 0.0, (0.9, 0.9)), traj(7, 0.0, (0.0, 0.0))]
    out = ProfFilter(keep=4, process="prm")([TrajectoryGroup(TASK, tuple(pos + neg))])
    assert sorted(ids(out)) == ["r4", "r5", "r6", "r7"]  # n − k kept; the 4 lowest-consistency positives removed
    # 2 positives, 6 negatives: the negatives removed are the ones with the highest process scores
    neg = [traj(10 + i, 0.0, (s, s)) for i, s in enumerate([0.9, 0.8, 0.7, 0.6, 0.1, 0.0])]
    out = ProfFilter(keep=4, process="prm")([TrajectoryGroup(TASK, tuple(pos[:2] + neg))])
    assert sorted(ids(out)) == ["r0", "r1", "r14", "r15"]


def test_prof_penalises_too_few_steps_and_passes_infra_failures():
    few = traj(0, 1.0, (0.9,))  # one scored step < min_steps: the −10 penalty makes it the first to go
    many = [traj(i, 1.0, (0.5, 0.5)) for i in range(1, 5)]
    infra = traj(9, 0.0, stop=StopReason.INFRA_ERROR)
    out = ProfFilter(keep=3, process="prm")([TrajectoryGroup(TASK, (few, *many, infra))])
    kept = ids(out)
    assert "r0" not in kept and "r9" in kept and len(kept) == 4


# --- GRPO-RoC ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pos", "neg", "expected"), [(20, 12, (10, 6)), (30, 2, (14, 2)), (1, 31, (1, 15)), (3, 29, (2, 14))]
)
def test_roc_counts_worked_example_7_5(pos, neg, expected):
    assert roc_counts(pos, neg, 16) == expected


def test_roc_keeps_cleanest_positives_and_first_negatives():
    positives = [traj(i, 1.0, errors=i % 4) for i in range(20)]  # error fraction i%4/(i%4+1)
    negatives = [traj(100 + i, 0.0, errors=1) for i in range(12)]
    out = ResampleOnCorrect(target=16)([TrajectoryGroup(TASK, tuple(positives + negatives))])
    kept = out[0].trajectories
    assert len(kept) == 16
    kept_pos = [t for t in kept if t.reward == 1.0]
    assert len(kept_pos) == 10 and max(map(roc_penalty, kept_pos)) <= min(
        roc_penalty(t) for t in positives if t not in kept_pos
    )
    assert [t.trajectory_id for t in kept if t.reward == 0.0] == [f"r{100 + i}" for i in range(6)]


def test_roc_penalty():
    assert roc_penalty(traj(0, 1.0)) == 0.0
    assert roc_penalty(traj(0, 1.0, errors=1)) == 0.5
    assert roc_penalty(traj(0, 1.0, stop=StopReason.MAX_TURNS, answer=None)) == 1.0
    no_tools = Trajectory("t", "g", "x", (0,), (turn(tool=False),), StopReason.ANSWERED, answer="42")
    assert roc_penalty(no_tools) == 0.5


# --- G-RA gate and dynamic sampling ------------------------------------------------------------------------------


def test_gra_gate_counts_dense_terms_only_when_outcome_passes():
    passed, failed = traj(0, 1.0, (0.3, 0.4)), traj(1, 0.5, (0.3, 0.4))
    out = GRAGate(threshold=1.0)([TrajectoryGroup(TASK, (passed, failed))])
    gated = {t.trajectory_id: [turn.reward for turn in t.turns] for t in out[0].trajectories}
    assert gated == {"r0": [0.3, 0.4], "r1": [None, None]}
    assert out[0].trajectories[1].turns[0].reward_components == {"prm": 0.3}  # still logged
    assert GRAGate(threshold=0.5)([TrajectoryGroup(TASK, (failed,))])[0].trajectories[0].turns[0].reward == 0.3


def test_dynamic_sampling_is_aware_of_dense_terms():
    all_right = TrajectoryGroup(TASK, (traj(0, 1.0), traj(1, 1.0)))
    mixed = TrajectoryGroup(TASK, (traj(2, 1.0), traj(3, 0.0)))
    dense = TrajectoryGroup(TASK, (traj(4, 0.0, (0.1, 0.0)), traj(5, 0.0, (0.0, None))))
    flat_dense = TrajectoryGroup(TASK, (traj(6, 0.0, (0.2,)), traj(7, 0.0, (0.2, None))))
    out, stats = apply_filters([("dynamic_sampling", DynamicSampling())], [all_right, mixed, dense, flat_dense])
    assert ids(out) == ["r2", "r3", "r4", "r5"]
    assert stats == {"filter/dynamic_sampling/dropped_trajectories": 4.0, "filter/dynamic_sampling/dropped_groups": 2.0}


def test_filters_read_an_abstained_reward_as_no_score_and_keep_it_for_credit_to_leave_out():
    abstained = dataclasses.replace(traj(9, 0.0), reward=None)
    right_or_silent = TrajectoryGroup(TASK, (traj(8, 1.0), abstained))  # one score only: nothing to compare
    out, _ = apply_filters([("dynamic_sampling", DynamicSampling())], [right_or_silent])
    assert out == []
    many = TrajectoryGroup(TASK, (*(traj(i, float(i % 2)) for i in range(6)), abstained))
    (kept,) = ResampleOnCorrect(target=4, min_pos=1, min_neg=1)([many])
    assert "r9" in ids([kept]) and len(kept.trajectories) == 5  # four scored kept, the abstained one passed on


def test_reward_counters_report_judge_stats_and_judges_abstain_without_asking():
    from agentrl.judge import Judge, boxed_number, majority

    class NeedsAnswer(Judge):
        rubric = "{answer}"

        def fields(self, task, answer):
            return None if answer is None else {"answer": answer}

    judge = NeedsAnswer("m", base_url="http://127.0.0.1:9/v1")
    r = judge.as_reward()
    assert r.name == "needs_answer" and r.inputs == ("task", "answer")
    assert asyncio.run(r(task=TASK, answer=None)) is None  # abstains before any request
    assert judge.stats.requests == 0 and judge.stats.abstained == 0
    assert boxed_number("a \\boxed{1} then \\boxed{ -1 }") == -1.0 and boxed_number("none") is None
    assert majority([1, 0, 0, 1]) == 0.0 and majority([0, -1, -1]) == -1.0
