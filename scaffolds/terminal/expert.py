"""The scripted expert for the terminal tasks: each command of a task's solution as one `bash` call."""

from __future__ import annotations

import json
import random
import re
from typing import Any

from agentrl.scaffolds.demonstration import tool_call_messages

from agentrl.types import Task

FINAL_ANSWER = "Done."


def expert_turns(task: Task) -> list[str]:
    """The assistant turns a perfect agent writes for `task`, in the Qwen/Hermes `<tool_call>` text format."""
    calls = [
        "<tool_call>\n" + json.dumps({"name": "bash", "arguments": {"command": c}}) + "\n</tool_call>"
        for c in task.metadata["expert"]
    ]
    return [*calls, FINAL_ANSWER]


def demonstration(task: Task, rng: random.Random, *, mistake_rate: float) -> list[dict[str, Any]]:
    """One conversation solving a one-command `task` as a real episode records it, deliberately wrong with
    probability `mistake_rate`: half the mistakes answer at once without the tool, half run the command with one
    name in it replaced by another (a made-up task's name by a miscopy of it: a letter dropped, doubled or
    changed).

    The commands of the easy tier print nothing, so the tool's reply is the shell tool's `(no output)`.
    """
    from agentrl.scaffolds.terminal import SYSTEM_PROMPT
    from agentrl.scaffolds.terminal.easy_family import TRAIN_NAMES, miscopy

    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": task.prompt},
    ]
    (command,) = task.metadata["expert"]
    if rng.random() < mistake_rate:
        names = [n for n in {*task.metadata.get("names", ()), *TRAIN_NAMES} if re.search(rf"\b{n}\b", command)]
        if rng.random() < 0.5 or not names:
            return [*messages, {"role": "assistant", "content": FINAL_ANSWER}]
        name = rng.choice(sorted(names))
        others = [n for n in TRAIN_NAMES if n not in names]
        wrong = rng.choice(others) if name in TRAIN_NAMES else miscopy(rng, name)
        command = re.sub(rf"\b{name}\b", wrong, command)
    messages += tool_call_messages("bash", {"command": command}, "(no output)", call_id="call_0_0")
    return [*messages, {"role": "assistant", "content": FINAL_ANSWER}]
