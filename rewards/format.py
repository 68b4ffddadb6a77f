"""Format rewards: properties of how the policy used the tool-call format."""

from __future__ import annotations

from agentrl.reward import reward
from agentrl.types import Trajectory


@reward
def tool_error_rate(trajectory: Trajectory) -> float | None:
    """Fraction of tool calls that came back as errors, plus malformed turns; abstains when there were none.

    Use it with weight 0 as a metric, or with a negative weight as a penalty.
    """
    calls = sum(len(t.tool_results) for t in trajectory.turns)
    bad = sum(r.is_error for t in trajectory.turns for r in t.tool_results)
    malformed = sum(t.parse_error is not None for t in trajectory.turns)
    if calls + malformed == 0:
        return None
    return (bad + malformed) / (calls + malformed)
