"""The property checklist of algorithms.md §8 for rewards: the information-gain probe (telescoping, answer tokens
only), the OpenClaw judge's vote, PROF, GRPO-RoC, G-RA and overlong shaping, asserted with hypothesis where a
property holds for every input and with hand-computed cases where it is a table (the credit side:
`test_credit_properties.py`).
"""

from __future__ import annotations

import asyncio
import math

import pytest
from agentrl.rewards.combinators import GRAGate, ProfFilter, ResampleOnCorrect, roc_penalty
from agentrl.rewards.info_gain import InfoGain
from agentrl.rewards.judge_prm import JudgePRM
from agentrl.rewards.outcome import overlong_penalty
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentrl.judge import majority
from agentrl.types import StopReason, Task, ToolCall, ToolResult, Trajectory, TrajectoryGroup, Turn

pytestmark = pytest.mark.unit

FAST = settings(max_examples=20, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
TASK = Task("t", "?", answer="Paris")


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


# --- information gain (IGPO) ----------------------------------------------------------------------------


class ProbePolicy:
    """A model double for the teacher-forced probe. Its tokenizer maps each character to its code point (so any
    text round-trips and tail, lead and answer join as one text); P(GT | history) is looked up by history length;
    the probe's lead tokens get an arbitrary log-prob, so only the answer's tokens may count."""

    class Tokenizer:
        all_special_ids: list[int] = []

        def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
            return [ord(c) for c in text]

        def decode(self, ids) -> str:
            return "".join(map(chr, ids))

    def __init__(self, probabilities: dict[int, float], lead_logprob: float = -3.0):
        self.tokenizer = self.Tokenizer()
        self.probabilities = probabilities
        self.lead_logprob = lead_logprob

    async def score_continuations(self, prefixes, continuations):
        rows = []
        answer = len(TASK.answer)
        for prefix, continuation in zip(prefixes, continuations, strict=True):
            lead = [self.lead_logprob] * (len(continuation) - answer)
            rows.append(lead + [math.log(self.probabilities[len(prefix)])] * answer)
        return rows


def _igpo_rollout(kinds: list[str]) -> Trajectory:
    """A rollout whose turns before the answer are tool rounds ("tool") or malformed calls answered with their
    parse error ("parse"); every turn samples 2 tokens and is followed by 2 observation tokens."""
    turns = []
    for k, kind in enumerate(kinds):
        tool = kind == "tool"
        turns.append(
            Turn(
                (10 + k, 11 + k),
                (-0.5, -0.5),
                (1.0, 1.0),
                "",
                tool_calls=(ToolCall(f"c{k}", "search", {}),) if tool else (),
                tool_results=(ToolResult(f"c{k}", "ok"),) if tool else (),
                observation_ids=(3, 4),
                parse_error=None if tool else "no closing tag",
            )
        )
    turns.append(Turn((30,), (-0.5,), (1.0,), ""))
    return Trajectory("t", "g", "r", (1, 2), tuple(turns), StopReason.ANSWERED)


@FAST
@given(st.lists(st.sampled_from(["tool", "parse"]), min_size=1, max_size=4), st.data())
def test_igpo_prob_diff_telescopes_over_tool_and_parse_error_turns_answer_tokens_only(kinds, data):
    trajectory = _igpo_rollout(kinds)
    # history lengths: prompt 2, each turn adds 2 completion + 2 observation tokens
    lengths = [2 + 4 * k for k in range(len(kinds) + 1)]
    probs = {n: data.draw(st.floats(0.01, 0.99)) for n in lengths}
    values = []
    for lead, lead_logprob in (("", -3.0), ("<a>", -3.0), ("<a>", -0.1)):
        gains = asyncio.run(
            InfoGain("prob_diff", lead=lead).turn_values(TASK, trajectory, ProbePolicy(probs, lead_logprob))
        )
        assert gains[-1] is None  # no gain for the answer turn
        assert all(g is not None for g in gains[:-1])  # a parse error is an observation too
        assert sum(gains[:-1]) == pytest.approx(probs[lengths[-1]] - probs[lengths[0]], abs=1e-9)
        values.append(gains)
    assert values[0] == pytest.approx(values[1]) and values[1] == pytest.approx(values[2])


# --- judges and reward combinators ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("votes", "expected"),
    [
        ([1.0, 1.0, -1.0], 1.0),  # 2 of 3
        ([-1.0, -1.0, 1.0, 0.0], -1.0),  # 2 of 4, the others split
        ([1.0, 1.0, 1.0, -1.0, -1.0], 1.0),
        ([0.0, 0.0, 1.0], 0.0),  # a majority for "ambiguous" is 0 too
        ([-1.0], -1.0),  # a single valid vote decides
        ([1.0, -1.0], 0.0),  # tie between two values
        ([1.0, 0.0, -1.0], 0.0),  # three-way tie
        ([1.0, 1.0, -1.0, -1.0, 0.0], 0.0),  # tie at the top, a third value below
        ([-1.0, -1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0], 0.0),  # 3–3 between +1 and 0
    ],
)
def test_openclaw_majority_of_valid_votes_tie_is_zero(votes, expected):
    assert majority(votes) == expected
    assert majority(list(reversed(votes))) == expected  # the order of the votes does not matter


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
