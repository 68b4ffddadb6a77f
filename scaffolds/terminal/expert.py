"""The scripted expert for the terminal tasks: each command of a task's solution as one `bash` call."""

from __future__ import annotations

import json

from agentrl.types import Task

FINAL_ANSWER = "Done."


def expert_turns(task: Task) -> list[str]:
    """The assistant turns a perfect agent writes for `task`, in the Qwen/Hermes `<tool_call>` text format."""
    calls = [
        "<tool_call>\n" + json.dumps({"name": "bash", "arguments": {"command": c}}) + "\n</tool_call>"
        for c in task.metadata["expert"]
    ]
    return [*calls, FINAL_ANSWER]
