"""`terminal_check`: the outcome reward of the terminal tasks, read off the workspace after the episode.

The checker runs while the episode's session is still open (`TerminalScaffold.finish_episode`) and its outcome
travels with the trajectory as the `terminal_check` measurement; this reward only reads it, and abstains when no
checker ran (not a terminal task, or an episode that ended for infrastructure reasons).
"""

from __future__ import annotations

from agentrl.reward import reward
from agentrl.types import Trajectory

CHECK_COMPONENT = "terminal_check"
"""The measurement that holds the checker's outcome (1 passed, 0 failed), set by the scaffold."""


@reward
def terminal_check(trajectory: Trajectory) -> float | None:
    """1 when the checker passed, 0 when it failed."""
    return trajectory.measurements.get(CHECK_COMPONENT)
