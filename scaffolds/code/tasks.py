"""The code scaffold's bundled tasks: arithmetic that a tiny model cannot do in its head.

Operands have two or three digits, so that each is one token of the tiny policy's tokenizer (it splits numbers
into chunks of three): writing the tool call is copying, which a 1M-parameter model learns, while the arithmetic
itself is not something it can learn.

Every task maps to one expression for the `calculate` tool, kept in `metadata["expression"]`; `answer` is that
expression's value as `calculate` prints it. Tasks come from one seeded stream of templates; a hash of the prompt
decides the split, so the held-out tasks never share a prompt with the training tasks and adding tasks to one
split never reshuffles the other.
"""

from __future__ import annotations

import functools
import hashlib
import random
from collections.abc import Callable

from agentrl.scaffolds.code.tools import calculate, evaluate, format_number

from agentrl.types import Task

SYSTEM_PROMPT = "Use the tools. Reply with only the final answer."
TOOLS = [calculate]

SEED = 20240611
NUM_TASKS = {"train": 24000, "test": 200}
"""Training tasks are plentiful so that the warm start meets each one about once: copying numbers it has never
seen is then the only way to fit them, which is what held-out tasks need."""
TEST_EVERY = 16
"""About one prompt in `TEST_EVERY` (by hash) is held out."""

Problem = tuple[str, str, str]
"""(prompt, expression, tier)."""


def _product(rng: random.Random) -> Problem:
    a, b = rng.randint(100, 999), rng.randint(12, 99)
    verb = rng.choice(["What is {} * {}?", "Compute {} * {}.", "Multiply {} by {}."])
    return verb.format(a, b), f"{a} * {b}", "easy"


def _sum(rng: random.Random) -> Problem:
    a, b = rng.randint(100, 999), rng.randint(100, 999)
    if rng.random() < 0.5:
        return f"What is {a} + {b}?", f"{a} + {b}", "easy"
    a, b = max(a, b), min(a, b)
    return f"What is {a} - {b}?", f"{a} - {b}", "easy"


def _quotient(rng: random.Random) -> Problem:
    b, q = rng.randint(3, 99), rng.randint(12, 999)
    return f"What is {b * q} divided by {b}?", f"{b * q} / {b}", "easy"


def _two_step(rng: random.Random) -> Problem:
    a, b, c = rng.randint(100, 999), rng.randint(100, 999), rng.randint(3, 99)
    if rng.random() < 0.5:
        return f"Compute ({a} + {b}) * {c}.", f"({a} + {b}) * {c}", "medium"
    return f"What is {a} * {c} - {b}?", f"{a} * {c} - {b}", "medium"


_ITEMS = ["apples", "pens", "books", "stamps", "shells", "coins"]
_CONTAINERS = ["box", "crate", "bag", "shelf"]


def _word_problem(rng: random.Random) -> Problem:
    a, b, c = rng.randint(12, 999), rng.randint(12, 999), rng.randint(3, 60)
    item, container = rng.choice(_ITEMS), rng.choice(_CONTAINERS)
    kind = rng.randrange(3)
    if kind == 0:
        prompt = f"A {container} holds {a} {item}. How many {item} are in {b} of them?"
        return prompt, f"{a} * {b}", "medium"
    if kind == 1:
        prompt = f"Sam has {a} {item} and gets {b} more each day. How many after {c} days?"
        return prompt, f"{a} + {b} * {c}", "medium"
    prompt = f"{c} friends share {a * c} {item} equally. How many does each get?"
    return prompt, f"{a * c} / {c}", "medium"


_TEMPLATES: list[Callable[[random.Random], Problem]] = [_product, _sum, _quotient, _two_step, _word_problem]


def split_of(prompt: str) -> str:
    """`test` for about one prompt in `TEST_EVERY`, by a hash that does not depend on the Python process."""
    digest = hashlib.sha256(prompt.encode()).digest()
    return "test" if int.from_bytes(digest[:4], "big") % TEST_EVERY == 0 else "train"


@functools.cache
def _all_tasks() -> dict[str, tuple[Task, ...]]:
    rng = random.Random(SEED)
    out: dict[str, list[Task]] = {"train": [], "test": []}
    seen: set[str] = set()
    while any(len(out[s]) < n for s, n in NUM_TASKS.items()):
        prompt, expression, tier = rng.choice(_TEMPLATES)(rng)
        split = split_of(prompt)
        if prompt in seen or len(out[split]) >= NUM_TASKS[split]:
            continue
        seen.add(prompt)
        task_id = f"code/{split}/{len(out[split]):05d}"
        metadata = {"tier": tier, "expression": expression}
        answer = format_number(evaluate(expression))
        out[split].append(Task(task_id, prompt, answer, metadata, split=split, scaffold="code"))
    return {s: tuple(ts) for s, ts in out.items()}


def tasks(split: str) -> list[Task]:
    """The bundled tasks of one split (`train` or `test`), in a fixed order."""
    if split not in NUM_TASKS:
        raise ValueError(f"unknown split {split!r}; expected one of {sorted(NUM_TASKS)}")
    return list(_all_tasks()[split])
