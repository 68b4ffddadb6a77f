"""Outcome rewards: compare the episode's final answer with the task's ground truth (exact match, F1, math
equivalence), count passing tests, gate on format, and shape overlong responses. Each abstains (None) when the
input it needs is missing."""

from __future__ import annotations

import logging
import re
import string
import threading
from collections import Counter
from collections.abc import Sequence
from typing import Any

from agentrl.reward import Reward, reward
from agentrl.types import StopReason, Task, ToolResult, Trajectory


def normalize_answer(text: str) -> str:
    """Lower-case, strip punctuation at the ends, articles and extra whitespace (SQuAD-style).

    >>> normalize_answer("  The Quell. ")
    'quell'
    """
    text = text.lower().strip().strip(string.punctuation + " ")
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


@reward
def exact_match(task: Task, answer: str | None) -> float | None:
    """1.0 when the normalised answer equals the normalised ground truth, else 0.0; abstains without one.

    >>> from agentrl.types import Task
    >>> exact_match.fn(Task(id="t", prompt="?", answer="178377"), "178377")
    1.0
    """
    if task.answer is None:
        return None
    if answer is None:
        return 0.0
    return float(normalize_answer(answer) == normalize_answer(task.answer))


@reward(name="f1")
def token_f1(task: Task, answer: str | None) -> float | None:
    """Token-level F1 between the answer and the ground truth (SQuAD).

    >>> from agentrl.types import Task
    >>> round(token_f1.fn(Task(id="t", prompt="?", answer="new tolvar city"), "tolvar city"), 3)
    0.8
    """
    if task.answer is None:
        return None
    gold, pred = normalize_answer(task.answer).split(), normalize_answer(answer or "").split()
    common = sum((Counter(gold) & Counter(pred)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(gold)
    return 2 * precision * recall / (precision + recall)


@reward(name="math_equiv")
def math_equivalence(task: Task, answer: str | None) -> float | None:
    """1.0 when the answer is mathematically equivalent to the ground truth (math-verify: LaTeX, fractions,
    sets, intervals, `\\boxed{}`), else 0.0; abstains without a ground truth.

    >>> from agentrl.types import Task
    >>> math_equivalence.fn(Task(id="t", prompt="?", answer="1/2"), "$\\\\frac{1}{2}$")
    1.0
    """
    if task.answer is None:
        return None
    if not answer:
        return 0.0
    from math_verify import parse, verify

    # math-verify's timeouts use SIGALRM, which only works on the main thread; elsewhere they must be off (and
    # math-verify then warns on every call)
    timeout_s = 5 if threading.current_thread() is threading.main_thread() else None
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    gold = parse(task.answer, parsing_timeout=timeout_s)
    pred = parse(answer, parsing_timeout=timeout_s)
    if not gold or not pred:
        return float(normalize_answer(answer) == normalize_answer(task.answer))
    return float(verify(gold, pred, timeout_seconds=timeout_s))


_PYTEST_COUNT = re.compile(r"(\d+) (passed|failed|error|errors)\b")


def tests_passed_and_total(tool_results: Sequence[ToolResult]) -> tuple[int, int] | None:
    """(passed, total) from the latest tool result that reports a test run, or None when none did.

    A result reports a run through its metrics (`tests_passed` and `tests_total`, what a test-runner tool
    should emit) or, failing that, through a pytest summary line (`3 passed, 1 failed`) in its text.
    """
    for result in reversed(tool_results):
        if "tests_passed" in result.metrics and "tests_total" in result.metrics:
            return int(result.metrics["tests_passed"]), int(result.metrics["tests_total"])
        counts = {"passed": 0, "failed": 0, "error": 0}
        for number, kind in _PYTEST_COUNT.findall(result.text):
            counts["error" if kind == "errors" else kind] += int(number)
        if sum(counts.values()):
            return counts["passed"], sum(counts.values())
    return None


@reward(name="tests_pass")
def tests_pass_fraction(tool_results: list[ToolResult]) -> float | None:
    """Fraction of the task's tests that passed in the latest test run; abstains when no test ran.

    >>> from agentrl.types import ToolResult
    >>> tests_pass_fraction.fn([ToolResult("c", "===== 3 passed, 1 failed in 0.2s =====")])
    0.75
    """
    counts = tests_passed_and_total(tool_results)
    if counts is None or counts[1] == 0:
        return None
    return counts[0] / counts[1]


@reward(name="tests_pass_all")
def tests_pass_all(tool_results: list[ToolResult]) -> float | None:
    """1.0 when every test of the latest test run passed, else 0.0; abstains when no test ran."""
    fraction = tests_pass_fraction.fn(tool_results)
    return None if fraction is None else float(fraction == 1.0)


def format_ok(trajectory: Trajectory) -> bool:
    """The episode ended with a non-empty answer and every turn's tool-call markup parsed."""
    return (
        trajectory.stop_reason is StopReason.ANSWERED
        and bool((trajectory.answer or "").strip())
        and all(t.parse_error is None for t in trajectory.turns)
    )


@reward(name="format")
def format_gate(trajectory: Trajectory) -> float:
    """1.0 when the episode is well formed (see `format_ok`), else 0.0."""
    return float(format_ok(trajectory))


def format_gated(inner: Reward, *, penalty: float = -1.0, name: str | None = None) -> Reward:
    """`inner`'s value on well-formed episodes, `penalty` on the others (IGPO uses −2 for malformed answers).

    The gate never invents a score: if `inner` abstains on a well-formed episode, so does the gated reward.
    """
    inputs = tuple(dict.fromkeys((*inner.inputs, "trajectory")))

    async def gated(**available: Any) -> float | None:
        if not format_ok(available["trajectory"]):
            return penalty
        return await inner(**available)

    return Reward(fn=gated, name=name or f"{inner.name}_gated", level=inner.level, inputs=inputs)


def overlong_penalty(max_tokens: int, buffer_tokens: int, *, factor: float = 1.0, name: str = "overlong") -> Reward:
    """DAPO soft overlong punishment: 0 up to `max_tokens − buffer_tokens` sampled tokens, then linear down to
    `−factor` at `max_tokens` (and below it beyond).

    Deviation from verl's multi-turn reward manager: the length is the number of tokens the policy sampled,
    tool-output tokens excluded, so a verbose tool cannot push the policy into the penalty.
    """
    if not 0 < buffer_tokens <= max_tokens:
        raise ValueError("need 0 < buffer_tokens <= max_tokens")

    def overlong(trajectory: Trajectory) -> float:
        excess = trajectory.num_sampled_tokens - (max_tokens - buffer_tokens)
        return min(-excess / buffer_tokens * factor, 0.0)

    return Reward(fn=overlong, name=name, level="trajectory", inputs=("trajectory",))


overlong = overlong_penalty(max_tokens=256, buffer_tokens=64)
"""The registered default, sized for the tiny world (4 turns × 64 tokens); build your own with
`overlong_penalty` for longer budgets (DAPO uses 4096-token buffers)."""
