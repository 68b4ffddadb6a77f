"""`gui_check`: the outcome reward of the GUI tasks, read off the applications' state after the episode.

The checker runs while the episode's session is still open (`GuiScaffold.finish_episode`) and its outcome travels
with the trajectory as the `gui_check` measurement; this reward only reads it, and abstains when no checker ran
(not a GUI task, or an episode that ended for infrastructure reasons).
"""

from __future__ import annotations

from agentrl.reward import reward
from agentrl.types import Trajectory

CHECK_COMPONENT = "gui_check"


@reward
def gui_check(trajectory: Trajectory) -> float | None:
    """1.0 if the application state after the episode satisfied the task's checker, 0.0 if not."""
    return trajectory.measurements.get(CHECK_COMPONENT)
