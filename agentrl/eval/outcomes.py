"""Held-out success next to its infrastructure failures, per scaffold: what `Trainer.evaluate` logs and what
`agentrl eval` summarizes.

An episode that failed for infrastructure reasons (`StopReason.INFRA_ERROR`: a tool server, sandbox or endpoint
that failed) says nothing about the policy, so success is taken over the valid episodes only and the failures are
counted beside it; otherwise an outage could pass for wrong answers, or, dropped unseen, leave a success rate
over the few episodes that happened to get through. A scaffold whose every episode failed keeps its counts (and
has no success rate). An evaluation whose every episode failed measured nothing: `require_valid` raises
`InfraError` with the first failure, as a training step does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agentrl.errors import InfraError
from agentrl.eval.results import EvalRecord
from agentrl.types import Trajectory

UNNAMED = "all"
"""The scaffold of tasks that name none (a task file for one scaffold)."""


@dataclass(frozen=True)
class Outcome:
    """One evaluation episode as held-out success counts it."""

    scaffold: str
    success: bool
    infra_error: str | None = None
    """Why the episode failed for infrastructure reasons; None for a valid episode, solved or not."""

    @classmethod
    def of(cls, trajectory: Trajectory, scaffold: str | None, success: float) -> Outcome:
        """A scored trajectory of a task of `scaffold`, with its success (1 or 0) under the primary reward."""
        if trajectory.is_infra_failure:
            return cls(scaffold or UNNAMED, False, trajectory.error or trajectory.stop_reason.value)
        return cls(scaffold or UNNAMED, success >= 1.0)

    @classmethod
    def of_record(cls, record: EvalRecord) -> Outcome:
        """A line of `agentrl eval`'s results file."""
        error = None if record.finished else (record.error or record.stop_reason)
        return cls(record.scaffold or UNNAMED, record.success, error)


def scaffolds_of(outcomes: Sequence[Outcome]) -> list[str]:
    """The scaffolds the outcomes belong to, in first-seen order."""
    return list(dict.fromkeys(o.scaffold for o in outcomes))


def heldout_metrics(outcomes: Sequence[Outcome]) -> dict[str, float]:
    """`success` over the valid episodes (absent when there is none), `episodes` (the valid ones) and
    `infra_errors`; when more than one scaffold is mixed, the same again per scaffold (`success/code`,
    `episodes/code`, `infra_errors/code`, ...), every scaffold listed even when all its episodes failed."""
    out = _counts(outcomes)
    names = scaffolds_of(outcomes)
    if len(names) > 1:
        for name in names:
            out |= {f"{key}/{name}": v for key, v in _counts([o for o in outcomes if o.scaffold == name]).items()}
    return out


def require_valid(outcomes: Sequence[Outcome], what: str) -> None:
    """Raise `InfraError` naming the first failure when `what` had episodes and every one of them failed for
    infrastructure reasons: a success of 0 would hide a broken setup behind a plausible number."""
    if outcomes and all(o.infra_error is not None for o in outcomes):
        raise InfraError(
            f"every episode of {what} failed ({len(outcomes)} infrastructure failures); the first: "
            f"{outcomes[0].infra_error}"
        )


def _counts(outcomes: Sequence[Outcome]) -> dict[str, float]:
    valid = [o for o in outcomes if o.infra_error is None]
    out: dict[str, float] = {}
    if valid:
        out["success"] = sum(o.success for o in valid) / len(valid)
    out["episodes"] = len(valid)
    out["infra_errors"] = len(outcomes) - len(valid)
    return out
