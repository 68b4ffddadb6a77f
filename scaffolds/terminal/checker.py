"""The terminal scaffold's outcome reward: did the task's checker pass in the workspace after the episode."""

from __future__ import annotations

from agentrl.reward import reward

CHECK_COMPONENT = "terminal_check"
"""The reward component that holds the checker's outcome (1 passed, 0 failed), set by the scaffold."""


@reward
def terminal_check(trajectory) -> float | None:
    """1 when the checker passed, 0 when it failed; abstains when no checker ran (not a terminal task).

    The checker runs while the episode's session is still open (`TerminalScaffold.finish_episode`) and its
    outcome travels with the trajectory as the `terminal_check` component; this reward only reads it.
    """
    return trajectory.reward_components.get(CHECK_COMPONENT)
