"""The GUI scaffold's bundled tasks: goals over the four local applications, each with a checker of the app state.

Tiers: `easy` is one click on an element named in the goal ("Click the button labelled X"), `medium` two to four
actions on one page or two, `hard` a multi-page goal (sign in then change the password, check out an order).
Every task starts from the application's initial state at `metadata["start_path"]`, and its `metadata["steps"]`
are what a scripted expert does: `[action, role, name, value?]`, the element found by role and name in the
page outline. Within each tier every fourth task (in the fixed order below) is held out (`test`).
"""

from __future__ import annotations

import functools

from agentrl.scaffolds.gui.goals import GuiTask, States, goals

from agentrl.types import Task

SYSTEM_PROMPT = (
    "You operate a web browser. Act on the page with the tools, naming an element by its number in brackets or by "
    "its label. When the goal is done, reply with only: done"
)
TEST_EVERY = 4
"""Within each tier, every `TEST_EVERY`-th task is held out."""
START_PATHS = {"login": "/login", "todo": "/todo", "settings": "/settings", "shop": "/shop"}


@functools.cache
def gui_tasks() -> dict[str, tuple[GuiTask, Task]]:
    """Every bundled task by id: its definition (with the checker) and the `Task` a scaffold plays."""
    out: dict[str, tuple[GuiTask, Task]] = {}
    seen_in_tier: dict[str, int] = {}
    for spec in goals():
        n = seen_in_tier[spec.tier] = seen_in_tier.get(spec.tier, 0) + 1
        split = "test" if n % TEST_EVERY == 0 else "train"
        task_id = f"gui/{spec.app}/{spec.id}"
        metadata = {
            "tier": spec.tier,
            "app": spec.app,
            "start_path": START_PATHS[spec.app],
            "steps": [list(step) for step in spec.steps],
        }
        out[task_id] = (spec, Task(task_id, spec.goal, None, metadata, split=split, scaffold="gui"))
    return out


def tasks(split: str) -> list[Task]:
    """The bundled tasks of one split (`train` or `test`), in a fixed order."""
    if split not in ("train", "test"):
        raise ValueError(f"unknown split {split!r}; expected 'train' or 'test'")
    return [task for _, task in gui_tasks().values() if task.split == split]


def check(task_id: str, states: States) -> bool:
    """Whether the episode whose application states are `states` reached the goal of task `task_id`."""
    return bool(gui_tasks()[task_id][0].check(states))
