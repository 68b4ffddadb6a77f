"""A scripted expert for the search tasks: the demonstrations the tiny policy is warm-started on.

The expert follows the question's fields with the real `lookup` tool, one hop per turn, and answers with the last
result. With probability `mistake_rate` it makes one of the slips a weak model makes instead, so the warm-started
policy is imperfect on purpose and RL has something to fix:

- `guess`: answers at once with a plausible entity of the right kind, without calling the tool;
- `stop_early`: on a two-hop question, answers with the intermediate entity after the first hop;
- `wrong_field`: asks for another field of the same entity on the last hop and answers that.
"""

from __future__ import annotations

import random
from typing import Any

from agentrl.scaffolds.demonstration import tool_call_messages
from agentrl.scaffolds.search.tasks import SYSTEM_PROMPT
from agentrl.scaffolds.search.tools import lookup
from agentrl.scaffolds.search.world import FIELDS, TARGET_KIND, world

from agentrl.types import Task

MISTAKES = {"guess": 0.5, "stop_early": 0.25, "wrong_field": 0.25}
"""Relative frequency of each kind of mistake, where it applies."""


def demonstration(task: Task, rng: random.Random, *, mistake_rate: float) -> list[dict[str, Any]]:
    """One conversation solving `task` (OpenAI message dicts), deliberately wrong with probability `mistake_rate`."""
    fields: list[str] = list(task.metadata["fields"])
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": task.prompt},
    ]
    mistake = _pick_mistake(task, rng) if rng.random() < mistake_rate else None
    if mistake == "guess":
        kind = TARGET_KIND[fields[-1]]
        decoys = [e.name for e in world().of_kind(kind) if e.name != task.answer]
        messages.append({"role": "assistant", "content": rng.choice(decoys)})
        return messages
    entity: str = task.metadata["subject"]
    for hop, field in enumerate(fields):
        if mistake == "stop_early" and hop == len(fields) - 1:
            break
        if mistake == "wrong_field" and hop == len(fields) - 1:
            field = rng.choice(_other_fields(entity, field))
        result = lookup(entity, field)
        messages += tool_call_messages("lookup", {"entity": entity, "field": field}, result, call_id=f"call_{hop}")
        entity = result
    messages.append({"role": "assistant", "content": entity})
    return messages


def _pick_mistake(task: Task, rng: random.Random) -> str:
    """A mistake that makes sense for this question."""
    fields: list[str] = task.metadata["fields"]
    last_entity = task.metadata["subject"]
    for field in fields[:-1]:
        last_entity = world().fact(last_entity, field)
    possible = dict(MISTAKES)
    if len(fields) < 2:
        possible.pop("stop_early")
    if not _other_fields(last_entity, fields[-1]):
        possible.pop("wrong_field")
    return rng.choices(list(possible), weights=list(possible.values()))[0]


def _other_fields(entity: str, field: str) -> list[str]:
    return [f for f in FIELDS[world().entities[entity].kind] if f != field]
