"""The generated easy terminal tasks: held-out tasks use names no training task (or demonstration) uses."""

import random
import re

import pytest
from agentrl.scaffolds.terminal import easy_family, expert, tasks
from agentrl.scaffolds.terminal.easy_family import TEST_NAMES, TRAIN_NAMES, family
from agentrl.scaffolds.terminal.expert import FINAL_ANSWER

pytestmark = pytest.mark.unit


def names_in(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text)) & (set(TRAIN_NAMES) | set(TEST_NAMES))


def test_name_pools_are_disjoint_and_each_split_uses_only_its_own():
    assert not set(TRAIN_NAMES) & set(TEST_NAMES) and not set(easy_family.WORDS) & set(TEST_NAMES)
    for split, pool in (("train", TRAIN_NAMES), ("test", TEST_NAMES)):
        for spec in family(split, per_template=20):
            used = names_in(spec.prompt + " " + spec.expert[0])
            assert used and used <= set(pool), (split, spec.prompt)


def test_family_is_deterministic_and_more_tasks_only_add_to_the_bundled_ones():
    bundled = family("train")
    assert bundled == family("train")
    more = family("train", per_template=30)
    assert all(spec in more for spec in bundled) and len(more) == 30 * len(easy_family.TEMPLATES)
    assert len({s.slug for s in more}) == len(more)


def test_bundled_family_is_part_of_the_easy_tier_of_both_splits():
    ids = {split: {t.id for t in tasks.tasks(split)} for split in ("train", "test")}
    for split in ("train", "test"):
        for spec in family(split):
            assert spec.to_task().id in ids[split] and spec.tier == "easy"
    # every command the prompt spells out is the expert's command
    for spec in family("test"):
        assert f"({spec.expert[0]})" in spec.prompt


def test_demonstrations_are_real_episode_shaped_and_mistakes_follow_the_rate():
    rng = random.Random(0)
    specs = family("train", per_template=10)
    perfect = [expert.demonstration(s.to_task(), rng, mistake_rate=0.0) for s in specs]
    for spec, messages in zip(specs, perfect, strict=True):
        assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant"]
        assert messages[2]["tool_calls"][0]["function"]["arguments"] == {"command": spec.expert[0]}
        assert messages[-1]["content"] == FINAL_ANSWER
    wrong = [expert.demonstration(s.to_task(), rng, mistake_rate=1.0) for s in specs]
    for spec, messages in zip(specs, wrong, strict=True):
        calls = [m for m in messages if m.get("tool_calls")]
        assert not calls or calls[0]["tool_calls"][0]["function"]["arguments"]["command"] != spec.expert[0]
    assert sum(len(m) == 3 for m in wrong) not in (0, len(wrong))  # both kinds of mistake occur
