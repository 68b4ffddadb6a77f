"""The search scaffold's bundled tasks: one- and two-hop questions over the generated world.

A question names one subject entity and follows one field (tier `easy`) or two (tier `medium`), e.g. "Where was
the founder of Velmora born?" = `lookup("Velmora", "founder")`, then `lookup(<founder>, "birthplace")`. The path
is kept in `metadata["subject"]` and `metadata["fields"]`.

A hash of the subject's name sets about one subject in `TEST_EVERY` aside; every question about the others is a
training question. Held-out subjects alone do not make held-out facts: the founder of a training company is a
held-out subject too, and the training question "Where was the founder of <company> born?" looks up where they
were born. So a question about a set-aside subject is held out only when no fact on its path (a lookup with its
result, `path_facts`) is one a training question exposes (`exposed_facts`): held-out success then measures
looking facts up, not recalling the training questions or the demonstrations made from them (the experts'
episodes on the training questions, `expert.py`). In the bundled world that leaves 80 held-out questions, 78 of
them one hop: a second hop almost always reaches an entity that training questions ask about. The other questions about
set-aside subjects belong to neither split.
"""

from __future__ import annotations

import functools
import hashlib
import random

from agentrl.scaffolds.search.tools import lookup
from agentrl.scaffolds.search.world import world

from agentrl.types import Task

SYSTEM_PROMPT = "Use the tools. Reply with only the final answer."
TOOLS = [lookup]

SEED = 11
TEST_EVERY = 6
"""About one subject entity in `TEST_EVERY` (by hash) is set aside; questions about it may be held out."""

Fact = tuple[str, str, str]
"""One lookup and its result: (entity, field, value)."""

QUESTIONS: dict[tuple[str, ...], str] = {
    ("founder",): "Who founded {}?",
    ("headquarters",): "Where is {} headquartered?",
    ("birthplace",): "Where was {} born?",
    ("employer",): "Which company does {} work for?",
    ("country",): "In which country is {}?",
    ("mayor",): "Who is the mayor of {}?",
    ("capital",): "What is the capital of {}?",
    ("founder", "birthplace"): "Where was the founder of {} born?",
    ("founder", "employer"): "Which company employs the founder of {}?",
    ("headquarters", "country"): "In which country is {} headquartered?",
    ("headquarters", "mayor"): "Who is the mayor of the city where {} is headquartered?",
    ("birthplace", "country"): "In which country was {} born?",
    ("birthplace", "mayor"): "Who is the mayor of the city where {} was born?",
    ("employer", "founder"): "Who founded the company {} works for?",
    ("employer", "headquarters"): "Where is the company {} works for headquartered?",
    ("mayor", "birthplace"): "Where was the mayor of {} born?",
    ("mayor", "employer"): "Which company does the mayor of {} work for?",
    ("country", "capital"): "What is the capital of the country {} is in?",
    ("capital", "mayor"): "Who is the mayor of the capital of {}?",
}
"""Question templates by the fields they follow from the subject."""


def split_of(subject: str) -> str:
    """`test` for about one subject in `TEST_EVERY`, by a hash that does not depend on the Python process."""
    digest = hashlib.sha256(subject.encode()).digest()
    return "test" if int.from_bytes(digest[:4], "big") % TEST_EVERY == 0 else "train"


def path_facts(subject: str, fields: tuple[str, ...] | list[str]) -> list[Fact]:
    """The lookups that answer a question, in order, each with its result."""
    kb, entity, out = world(), subject, []
    for field in fields:
        value = kb.fact(entity, field)
        out.append((entity, field, value))
        entity = value
    return out


def exposed_facts(subject: str, fields: tuple[str, ...] | list[str]) -> set[Fact]:
    """Every fact an episode of this question can show: its path, and every other field of each entity the path
    looks up (the expert's `wrong_field` slip asks one of them)."""
    kb = world()
    return {(e, f, v) for e, _, _ in path_facts(subject, fields) for f, v in kb.entities[e].facts.items()}


def _questions() -> list[tuple[str, tuple[str, ...], str, str]]:
    """Every (subject, fields, prompt, answer) the world supports, in a fixed order."""
    kb = world()
    out = []
    for entity in kb.entities.values():
        for fields, template in QUESTIONS.items():
            if fields[0] not in entity.facts:
                continue
            answer = entity.facts[fields[0]]
            for field in fields[1:]:
                answer = kb.fact(answer, field)
            out.append((entity.name, fields, template.format(entity.name), answer))
    return out


@functools.cache
def _all_tasks() -> dict[str, tuple[Task, ...]]:
    questions = _questions()
    random.Random(SEED).shuffle(questions)
    exposed = set().union(*(exposed_facts(q[0], q[1]) for q in questions if split_of(q[0]) == "train"))
    by_split: dict[str, list[Task]] = {"train": [], "test": []}
    for subject, fields, prompt, answer in questions:
        split = split_of(subject)
        if split == "test" and not exposed.isdisjoint(path_facts(subject, fields)):
            continue  # answerable from what training shows: neither training nor held out
        task_id = f"search/{split}/{len(by_split[split]):05d}"
        metadata = {"tier": "easy" if len(fields) == 1 else "medium", "subject": subject, "fields": list(fields)}
        by_split[split].append(Task(task_id, prompt, answer, metadata, split=split, scaffold="search"))
    return {split: tuple(ts) for split, ts in by_split.items()}


def tasks(split: str) -> list[Task]:
    """The bundled tasks of one split (`train` or `test`), in a fixed order."""
    if split not in ("train", "test"):
        raise ValueError(f"unknown split {split!r}; expected 'train' or 'test'")
    return list(_all_tasks()[split])
