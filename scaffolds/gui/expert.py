"""A scripted expert for the GUI tasks: reads the page outline and acts on the element its next step names.

A step names an element by role and name (`["click", "button", "Sign in"]`); the expert finds that element's
number in the latest observation, so it solves a task only if the outline shows the element and the tool acts on
the number it shows. `reply(prompt)` is the expert as a `ScriptedPolicy` response function.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agentrl.scaffolds.gui.tasks import gui_tasks

from agentrl.types import Task

_ELEMENT = re.compile(r'^\[(\d+)\] (\S+) "((?:[^"\\]|\\.)*)"', re.MULTILINE)


def element_id(observation: str, role: str, name: str) -> int:
    """The number of the element with this role and name in a page outline; KeyError if there is none."""
    for match in _ELEMENT.finditer(observation):
        if match.group(2) == role and json.loads(f'"{match.group(3)}"') == name:
            return int(match.group(1))
    raise KeyError(f"no {role} {name!r} in the page outline:\n{observation}")


def tool_call(step: list[Any], observation: str) -> tuple[str, dict[str, Any]]:
    """The (tool name, arguments) that carries out one expert step on the page `observation` shows."""
    action, role, name, *value = step
    id = element_id(observation, role, name)
    if action == "click":
        return "click", {"id": id}
    if action == "type":
        return "type", {"id": id, "text": value[0]}
    if action == "select":
        return "select", {"id": id, "option": value[0]}
    raise ValueError(f"unknown expert action {action!r}")


def task_in(prompt: str) -> Task:
    """The bundled task whose goal the prompt states (the longest goal found, so no goal shadows another)."""
    found = [task for _, task in gui_tasks().values() if task.prompt in prompt]
    if not found:
        raise KeyError("the prompt states no bundled GUI goal")
    return max(found, key=lambda task: len(task.prompt))


def reply(prompt: str) -> str:
    """The expert's next assistant turn after a decoded chat prompt: the next step's tool call, or `done`."""
    task = task_in(prompt)
    done = prompt.count("<|im_start|>assistant") - 1
    steps = task.metadata["steps"]
    if done >= len(steps):
        return "done"
    observation = prompt[prompt.rindex("url: ") :]
    name, arguments = tool_call(steps[done], observation)
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"
