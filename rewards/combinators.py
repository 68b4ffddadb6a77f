"""Reward filters: what happens to scored groups between scoring and credit assignment.

The weighted sum itself is `agentrl.reward.RewardStack` (weight 0 = metric only). The filters here are
`list[TrajectoryGroup] -> list[TrajectoryGroup]` (`agentrl.reward.GroupFilter`), selected with
`reward_filters=[...]` and applied in order by `agentrl.reward.apply_filters`, which counts what each removed:

- `GRAGate`: G-RA (arXiv 2508.10548) — turn rewards only count on trajectories whose outcome clears a gate.
- `ProfFilter`: PROF (arXiv 2509.03403) — keep the rollouts whose process and outcome rewards agree.
- `ResampleOnCorrect`: GRPO-RoC (rStar2-Agent, arXiv 2508.20722) — keep the cleanest correct rollouts.
- `DynamicSampling`: DAPO (arXiv 2503.14476) — drop groups with no learning signal, dense turn terms included.

Infrastructure failures are never counted as positives or negatives; the filters pass them through untouched
(credit assignment excludes them).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from agentrl.rewards.outcome import format_ok

from agentrl.types import Trajectory, TrajectoryGroup


def outcome_of(trajectory: Trajectory, component: str | None) -> float:
    """The outcome a filter reads: one named component, or the trajectory's summed reward."""
    if component is not None:
        return trajectory.reward_components.get(component, 0.0)
    return trajectory.reward or 0.0


def _scored(group: TrajectoryGroup) -> tuple[Trajectory, ...]:
    """The group's trajectories that have a reward: neither infrastructure failures nor abstained."""
    return tuple(t for t in group.valid if t.reward is not None)


def _replace_valid(group: TrajectoryGroup, kept: Sequence[Trajectory]) -> TrajectoryGroup:
    """The group with only `kept` of its scored trajectories; the unscored ones stay (credit leaves them out)."""
    ids = {t.trajectory_id for t in kept}
    return TrajectoryGroup(
        group.task,
        tuple(t for t in group.trajectories if t.is_infra_failure or t.reward is None or t.trajectory_id in ids),
    )


@dataclass(frozen=True)
class GRAGate:
    """Gated reward accumulation: `R = R_out + 1[R_out ≥ threshold] · Σ_t r_t`.

    On trajectories whose outcome is below `threshold` the turn reward slots are emptied (None: no turn
    reward), so dense terms (PRM, information gain) cannot be farmed by episodes that fail. The components stay
    for logging. Deviation: the paper gates step rewards of SWE agents on a 4-level outcome; here any outcome
    component (or the summed trajectory reward) and any turn reward.
    """

    threshold: float = 1.0
    outcome: str | None = None
    """Component that is the outcome; None = the summed trajectory reward."""

    def __call__(self, groups: list[TrajectoryGroup]) -> list[TrajectoryGroup]:
        def gate(t: Trajectory) -> Trajectory:
            if t.is_infra_failure or outcome_of(t, self.outcome) >= self.threshold:
                return t
            return dataclasses.replace(t, turns=tuple(dataclasses.replace(turn, reward=None) for turn in t.turns))

        return [TrajectoryGroup(g.task, tuple(gate(t) for t in g.trajectories)) for g in groups]


def prof_removal_counts(n_pos: int, n_neg: int, remove: int) -> tuple[int, int]:
    """PROF's (positives, negatives) to remove: `k_pos = min(k, round((Δ + k) / 2))`, Δ = #pos − #neg, capped
    by what the group has. Python's banker's rounding, as in the official code."""
    k_pos = max(0, min(remove, round((n_pos - n_neg + remove) / 2), n_pos))
    k_neg = min(remove - k_pos, n_neg)
    return k_pos, k_neg


@dataclass(frozen=True)
class ProfFilter:
    """PROF: rank rollouts by process–outcome consistency and train only on the top `keep` of each group.

    With p_{i,k} the process score of turn k (a PRM probability or a judge's +1/0/−1), p̄ the mean over all
    scored turns of the batch and r_i ∈ {0, 1}: `s_i = mean_k 2(p_{i,k} − p̄) · (2 r_i − 1)`, minus 10 when the
    rollout has fewer than `min_steps` or more than `max_steps` scored turns. Then the lowest-s positives and
    lowest-s negatives (those the PRM likes most) are removed, `prof_removal_counts` many of each.
    `variant="correct"` (PROF-Correct) removes the negatives at random instead. Deviation: steps are agent
    turns scored by a turn-level PRM, not `\\n\\n`-separated segments of one response.
    """

    keep: int = 4
    process: str | None = None
    """Turn component holding the process score; None = the turn reward slot."""
    outcome: str | None = None
    correct_threshold: float = 1.0
    min_steps: int = 2
    max_steps: int = 30
    variant: Literal["both", "correct"] = "both"
    seed: int = 0

    def step_scores(self, t: Trajectory) -> list[float]:
        if self.process is None:
            return [turn.reward for turn in t.turns if turn.reward is not None]
        return [turn.reward_components[self.process] for turn in t.turns if self.process in turn.reward_components]

    def __call__(self, groups: list[TrajectoryGroup]) -> list[TrajectoryGroup]:
        steps = [p for g in groups for t in _scored(g) for p in self.step_scores(t)]
        p_bar = sum(steps) / len(steps) if steps else 0.0
        rng = random.Random(self.seed)
        out = []
        for g in groups:
            valid = list(_scored(g))
            if len(valid) <= self.keep:
                out.append(g)
                continue
            score = {t.trajectory_id: self.consistency(t, p_bar) for t in valid}
            pos = [t for t in valid if outcome_of(t, self.outcome) >= self.correct_threshold]
            neg = [t for t in valid if outcome_of(t, self.outcome) < self.correct_threshold]
            k_pos, k_neg = prof_removal_counts(len(pos), len(neg), len(valid) - self.keep)
            pos = sorted(pos, key=lambda t: score[t.trajectory_id])[k_pos:]
            if self.variant == "correct":
                neg = rng.sample(neg, len(neg) - k_neg)
            else:
                neg = sorted(neg, key=lambda t: score[t.trajectory_id])[k_neg:]
            out.append(_replace_valid(g, pos + neg))
        return out

    def consistency(self, t: Trajectory, p_bar: float) -> float:
        steps = self.step_scores(t)
        sign = 1.0 if outcome_of(t, self.outcome) >= self.correct_threshold else -1.0
        s = sign * sum(2 * (p - p_bar) for p in steps) / len(steps) if steps else 0.0
        return s - 10.0 if not self.min_steps <= len(steps) <= self.max_steps else s


def roc_penalty(t: Trajectory) -> float:
    """GRPO-RoC's p_err + p_fmt for one rollout (lower is cleaner).

    p_err: the fraction of tool results that are errors, 0.5 without any tool call. p_fmt: 1.0 when the
    episode did not end in a well-formed answer, else the fraction of turns with malformed tool-call markup.
    Deviation: rStar counts duplicated `<answer>` tags for p_fmt; here an answer ends the episode, so malformed
    turns are the format issue that can occur.
    """
    results = [r for turn in t.turns for r in turn.tool_results]
    p_err = sum(r.is_error for r in results) / len(results) if results else 0.5
    malformed = sum(turn.parse_error is not None for turn in t.turns) / max(len(t.turns), 1)
    return p_err + (malformed if format_ok(t) else 1.0)


def roc_counts(n_pos: int, n_neg: int, target: int, min_pos: int = 2, min_neg: int = 2) -> tuple[int, int]:
    """(positives, negatives) to keep: proportional to the group, at least min_pos / min_neg when available."""
    n = n_pos + n_neg
    keep_neg = min(max(round(n_neg * target / n), min(min_neg, n_neg)), n_neg)
    keep_pos = min(target - keep_neg, n_pos)
    keep_pos = max(keep_pos, min(min_pos, n_pos))
    return keep_pos, min(target - keep_pos, n_neg)


@dataclass(frozen=True)
class ResampleOnCorrect:
    """GRPO-RoC down-sampling of an oversampled group to `target` rollouts: positives and negatives in the
    group's proportions (at least `min_pos` / `min_neg` when available); the positives kept are those with the
    fewest tool errors and format issues (`roc_penalty`), the negatives the first ones in arrival order, so
    failures keep their diversity. The reward itself stays outcome-only."""

    target: int = 16
    outcome: str | None = None
    correct_threshold: float = 1.0
    min_pos: int = 2
    min_neg: int = 2

    def __call__(self, groups: list[TrajectoryGroup]) -> list[TrajectoryGroup]:
        out = []
        for g in groups:
            valid = list(_scored(g))
            if len(valid) <= self.target:
                out.append(g)
                continue
            pos = [t for t in valid if outcome_of(t, self.outcome) >= self.correct_threshold]
            neg = [t for t in valid if outcome_of(t, self.outcome) < self.correct_threshold]
            keep_pos, keep_neg = roc_counts(len(pos), len(neg), self.target, self.min_pos, self.min_neg)
            # sorted() is stable: equally clean positives keep their arrival order
            out.append(_replace_valid(g, sorted(pos, key=roc_penalty)[:keep_pos] + neg[:keep_neg]))
        return out


def has_signal(group: TrajectoryGroup, eps: float = 1e-9) -> bool:
    """Whether a group can produce a nonzero advantage: its outcomes differ, or its turn rewards do."""
    valid = _scored(group)
    outcomes = [t.reward for t in valid]
    if outcomes and max(outcomes) - min(outcomes) > eps:
        return True
    dense = [turn.reward for t in valid for turn in t.turns if turn.reward is not None]
    return bool(dense) and max(dense) - min(dense) > eps


@dataclass(frozen=True)
class DynamicSampling:
    """Drop groups without learning signal (DAPO dynamic sampling, rStar's `reject_equal_reward`).

    Deviation: a group whose outcomes are all equal but whose turn rewards vary (information gain, PRM) keeps
    its signal under turn-level credit, so it stays. Refilling the batch with new groups is the collector's
    business; this only filters.
    """

    eps: float = 1e-9

    def __call__(self, groups: list[TrajectoryGroup]) -> list[TrajectoryGroup]:
        return [g for g in groups if has_signal(g, self.eps)]


gra_gate = GRAGate()
prof = ProfFilter()
prof_correct = ProfFilter(variant="correct")
roc = ResampleOnCorrect()
dynamic_sampling = DynamicSampling()
