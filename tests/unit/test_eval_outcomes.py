"""Held-out success next to its infrastructure failures (`agentrl.eval.outcomes`), as both evaluations log it."""

import pytest

from agentrl.errors import InfraError
from agentrl.eval.outcomes import Outcome, heldout_metrics, require_valid
from agentrl.types import StopReason, Trajectory

pytestmark = pytest.mark.unit


def outcomes(scaffold: str, solved: int, failed: int, infra: int) -> list[Outcome]:
    return (
        [Outcome(scaffold, True)] * solved
        + [Outcome(scaffold, False)] * failed
        + [Outcome(scaffold, False, f"{scaffold} down")] * infra
    )


def test_success_is_over_valid_episodes_with_the_failures_beside_it():
    m = heldout_metrics(outcomes("code", solved=1, failed=1, infra=2))
    assert m == {"success": 0.5, "episodes": 2, "infra_errors": 2}  # one scaffold: no breakdown


def test_a_scaffold_whose_every_episode_failed_stays_in_the_breakdown():
    m = heldout_metrics(outcomes("code", solved=3, failed=1, infra=0) + outcomes("search", 0, 0, infra=4))
    assert m["success"] == 0.75 and m["episodes"] == 4 and m["infra_errors"] == 4
    assert m["success/code"] == 0.75 and m["episodes/code"] == 4 and m["infra_errors/code"] == 0
    assert "success/search" not in m and m["episodes/search"] == 0 and m["infra_errors/search"] == 4


def test_an_evaluation_that_measured_nothing_raises_with_the_first_failure():
    require_valid([], "nothing")
    require_valid(outcomes("code", 0, 1, infra=5), "a mostly broken evaluation")
    with pytest.raises(InfraError, match=r"every episode of step 3 failed \(2 infrastructure failures\); the first: a"):
        require_valid([Outcome("x", False, "a"), Outcome("y", False, "b")], "step 3")
    assert heldout_metrics(outcomes("code", 0, 0, infra=2)) == {"episodes": 0, "infra_errors": 2}


def test_outcomes_of_trajectories():
    answered = Trajectory("t", "g", "t/0", (1,), (), StopReason.ANSWERED)
    broken = Trajectory("t", "g", "t/1", (1,), (), StopReason.INFRA_ERROR, error="sandbox died")
    assert Outcome.of(answered, "code", 1.0) == Outcome("code", True)
    assert Outcome.of(answered, None, 0.0) == Outcome("all", False)
    assert Outcome.of(broken, "code", 1.0) == Outcome("code", False, "sandbox died")
