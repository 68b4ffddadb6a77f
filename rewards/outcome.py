"""Outcome rewards: compare the episode's final answer with the task's ground truth."""

from __future__ import annotations

import re
import string
from collections import Counter

from agentrl.reward import reward
from agentrl.types import Task


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
