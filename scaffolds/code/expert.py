"""A scripted expert for the code tasks: the demonstrations the tiny policy is warm-started on.

The expert calls the real `calculate` tool and answers with its result. With probability `mistake_rate` it makes
one of the slips a weak model makes instead, so the warm-started policy is imperfect on purpose and RL has
something to fix:

- `guess`: answers at once with a plausible wrong number, without calling the tool;
- `miscopy`: calls the tool with one digit of an operand copied wrong, then answers that result.
"""

from __future__ import annotations

import random
import re
from typing import Any

from agentrl.scaffolds.code.tasks import SYSTEM_PROMPT
from agentrl.scaffolds.code.tools import calculate
from agentrl.scaffolds.demonstration import tool_call_messages

from agentrl.types import Task

MISTAKES = {"guess": 0.7, "miscopy": 0.3}
"""Relative frequency of each kind of mistake."""


def demonstration(task: Task, rng: random.Random, *, mistake_rate: float) -> list[dict[str, Any]]:
    """One conversation solving `task` (OpenAI message dicts), deliberately wrong with probability `mistake_rate`."""
    expression: str = task.metadata["expression"]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": task.prompt},
    ]
    mistake = rng.choices(list(MISTAKES), weights=list(MISTAKES.values()))[0] if rng.random() < mistake_rate else None
    if mistake == "guess":
        messages.append({"role": "assistant", "content": near_miss(calculate(expression), rng)})
        return messages
    if mistake == "miscopy":
        expression = miscopy(expression, rng)
    result = calculate(expression)
    messages += tool_call_messages("calculate", {"expression": expression}, result, call_id="call_0")
    messages.append({"role": "assistant", "content": result})
    return messages


def near_miss(answer: str, rng: random.Random) -> str:
    """A wrong number that looks like `answer`: the right leading digits, the rest made up."""
    digits = answer.lstrip("-")
    keep = rng.randint(1, len(digits) - 1) if len(digits) > 1 else 0
    while True:
        guess = digits[:keep] + "".join(rng.choice("0123456789") for _ in digits[keep:])
        if len(digits) > 1 and rng.random() < 0.2:  # a digit too few or too many
            guess = guess[:-1] if rng.random() < 0.5 else guess + rng.choice("0123456789")
        guess = guess.lstrip("0") or "0"
        if guess != digits:
            return ("-" if answer.startswith("-") else "") + guess


def miscopy(expression: str, rng: random.Random) -> str:
    """`expression` with one digit of one operand replaced by another digit."""
    spans = [m.span() for m in re.finditer(r"\d", expression)]
    start, end = rng.choice(spans)
    leading = start == 0 or not expression[start - 1].isdigit()  # a leading 0 would not parse
    wrong = rng.choice([d for d in ("123456789" if leading else "0123456789") if d != expression[start]])
    return expression[:start] + wrong + expression[end:]
