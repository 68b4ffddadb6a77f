"""The search scaffold's held-out split is leak-free: no fact on a held-out question's path (a lookup with its
result) is shown by the demonstrations the shipped tiny policies were built from, or lies on a training question's
path; and the training side is still exactly what those policies were built from."""

from __future__ import annotations

import hashlib
import json

import pytest
from agentrl.scaffolds.search import tasks as search_tasks
from agentrl.scaffolds.search.world import world

from agentrl.config import EvalConfig
from agentrl.tiny.build import data, stages
from agentrl.tiny.build.passes import EXTEND_PASSES

pytestmark = pytest.mark.unit

DEMONSTRATIONS_SHA256 = "a304b90072e98bfc4edc93871452600d8a30dad6f58af8549e72b936aff45072"
"""The search demonstrations `agentrl/tiny/policy` was built from (`python -m agentrl.tiny.build`, seed
`stages.SEED`). If this changes, so do the shipped weights: rebuild them, then update the digest."""
TRAIN_TASKS_SHA256 = "bb5c70c737fc11f395f68c7b4d02bf4dde4d53fc132ca32def300668760b5bf6"
"""The training tasks (id, prompt, answer, metadata) those demonstrations and the measured RL runs used."""


def digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def path(subject: str, fields: list[str]) -> list[tuple[str, str, str]]:
    """The lookups answering a question, each with its result, read off the world (not the split's own code)."""
    out, entity = [], subject
    for field in fields:
        value = world().entities[entity].facts[field]
        out.append((entity, field, value))
        entity = value
    return out


def shown(demonstrations: list[dict]) -> set[tuple[str, str, str]]:
    """Every (entity, field, result) a demonstration's lookups show."""
    facts = set()
    for demo in demonstrations:
        messages = demo["messages"]
        results = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
        for message in messages:
            for call in message.get("tool_calls") or ():
                arguments = call["function"]["arguments"]
                facts.add((arguments["entity"], arguments["field"], results[call["id"]]))
    return facts


def leaks(questions: list[tuple[str, str, list[str]]], known: set) -> dict[str, list[tuple[str, str, str]]]:
    """(id, subject, fields) → the facts on its path that `known` holds, for the questions with any."""
    found = {qid: [f for f in path(subject, fields) if f in known] for qid, subject, fields in questions}
    return {qid: facts for qid, facts in found.items() if facts}


def as_questions(tasks: list) -> list[tuple[str, str, list[str]]]:
    return [(t.id, t.metadata["subject"], t.metadata["fields"]) for t in tasks]


@pytest.fixture(scope="module")
def training():
    """What training shows: the demonstrations of `tiny` (seed `stages.SEED`) and of the replayed base
    demonstrations of `tiny-extended`'s passes, and the training tasks' paths."""
    seeds = sorted({stages.SEED} | {p.seed for p in EXTEND_PASSES})
    demos = {seed: data.demonstrations(data.MISTAKE_RATE, seed, ("search",)) for seed in seeds}
    train = search_tasks.tasks("train")
    return {
        "demos": demos,
        "demo_facts": set().union(*(shown(d) for d in demos.values())),
        "train": train,
        "train_facts": {f for t in train for f in path(t.metadata["subject"], t.metadata["fields"])},
    }


def test_no_heldout_fact_is_in_a_demonstration_or_on_a_training_path(training):
    heldout = as_questions(search_tasks.tasks("test"))
    assert heldout
    assert leaks(heldout, training["demo_facts"]) == {}
    assert leaks(heldout, training["train_facts"]) == {}


def test_the_check_finds_the_leaks_of_a_subject_only_split(training):
    """Held-out subjects alone (every question about a set-aside subject) leak: the check must see it."""
    by_subject = [
        (f"q{i}", subject, list(fields))
        for i, (subject, fields, _, _) in enumerate(search_tasks._questions())
        if search_tasks.split_of(subject) == "test"
    ]
    leaked = leaks(by_subject, training["demo_facts"] | training["train_facts"])
    assert len(leaked) > len(by_subject) // 2
    fully = [q for q in by_subject if all(f in training["demo_facts"] for f in path(q[1], q[2]))]
    assert fully, "some questions about set-aside subjects are answered, lookup by lookup, in the demonstrations"


def test_the_split_exposes_at_least_what_the_demonstrations_show(training):
    """`exposed_facts`, which the split is computed from, covers every lookup of the real demonstrations."""
    exposed = set().union(
        *(search_tasks.exposed_facts(t.metadata["subject"], t.metadata["fields"]) for t in training["train"])
    )
    assert training["demo_facts"] <= exposed
    assert training["train_facts"] <= exposed


def test_the_training_side_is_what_the_shipped_policy_was_built_from(training):
    train = [[t.id, t.prompt, t.answer, t.metadata] for t in training["train"]]
    assert digest(train) == TRAIN_TASKS_SHA256
    assert digest(training["demos"][stages.SEED]) == DEMONSTRATIONS_SHA256


def test_enough_heldout_questions_for_the_default_evaluation():
    """The default run evaluates `eval.max_tasks` tasks of the code+search mix, taken alternately."""
    test = search_tasks.tasks("test")
    assert len(test) >= EvalConfig().max_tasks // 2
    assert {t.metadata["subject"] for t in test}.isdisjoint(t.metadata["subject"] for t in search_tasks.tasks("train"))
