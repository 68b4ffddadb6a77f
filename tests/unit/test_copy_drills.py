"""Echo drills (the tiny policy's copy stage) and the made-up names the warm-start demonstrations copy."""

import random
import re

import pytest
from agentrl.scaffolds.demonstration import made_up_name
from agentrl.scaffolds.terminal import easy_family, expert

from agentrl.policy.loading import load_tokenizer
from agentrl.tiny import POLICY_DIR
from agentrl.tiny.build import copy_drills, swe_drills

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def pieces() -> list[str]:
    return copy_drills.vocabulary_pieces(load_tokenizer(str(POLICY_DIR)))


def test_vocabulary_pieces_are_printable_and_plain(pieces):
    assert len(pieces) > 2000
    assert not any("<|" in p or "\n" in p or not p.strip() or "<tool_call>" in p for p in pieces)


def test_every_round_repeats_the_user_message_exactly(pieces):
    rng = random.Random(0)
    kinds = set()
    for _ in range(300):
        messages = copy_drills.drill(rng, pieces)
        assert messages[0] == {"role": "system", "content": copy_drills.SYSTEM_PROMPT}
        rounds = messages[1:]
        assert copy_drills.ROUNDS[0] <= len(rounds) // 2 <= copy_drills.ROUNDS[1] and len(rounds) % 2 == 0
        for user, assistant in zip(rounds[::2], rounds[1::2], strict=True):
            assert user["role"] == "user" and assistant == {"role": "assistant", "content": user["content"]}
            assert user["content"].strip()
        kinds.add(any(c in rounds[0]["content"] for c in "/'(.") or " " in rounds[0]["content"])
    assert kinds == {True, False}  # realistic strings and strings of random pieces both occur


def test_lead_in_drills_answer_with_the_string_alone():
    rng = random.Random(4)
    for _ in range(300):
        system, user, assistant = copy_drills.lead_in_drill(rng)
        assert system["content"] == copy_drills.SYSTEM_PROMPT and assistant["role"] == "assistant"
        lead = next(lead for lead in copy_drills.LEAD_INS if user["content"].startswith(lead))
        assert user["content"] == lead + assistant["content"] and assistant["content"].strip()


def test_drills_are_deterministic(pieces):
    assert [copy_drills.drill(random.Random(5), pieces) for _ in range(3)] == [
        copy_drills.drill(random.Random(5), pieces) for _ in range(3)
    ]


def test_made_up_names_are_pronounceable_and_varied():
    rng = random.Random(1)
    names = [made_up_name(rng) for _ in range(2000)]
    assert all(re.fullmatch(r"[a-z]{3,10}", n) for n in names)
    assert len(set(names)) > 1500


def test_made_up_terminal_tasks_never_use_a_held_out_name():
    specs = easy_family.made_up(2000)
    held_out = set(easy_family.TEST_NAMES)
    assert all(not set(spec.names) & held_out for spec in specs)
    assert len({spec.names for spec in specs}) > 0.9 * len(specs)
    assert {spec.slug.split("-")[0] for spec in specs} == set(easy_family.TEMPLATES)
    # the expert command uses the names the task records; a mistake miscopies one of them
    rng = random.Random(2)
    for spec in specs[:200]:
        assert all(name in spec.prompt + str(spec.files) for name in spec.names)
        wrong = expert.demonstration(spec.to_task(), rng, mistake_rate=1.0)
        calls = [m for m in wrong if m.get("tool_calls")]
        if calls:
            command = calls[0]["tool_calls"][0]["function"]["arguments"]["command"]
            assert command != spec.expert[0] and f"({command})" not in spec.prompt


def test_swe_drills_name_made_up_files_and_functions_too():
    words = set(swe_drills._PACKAGES + swe_drills._MODULES + swe_drills._FUNC_NOUNS + swe_drills._METHOD_VERBS)
    words |= {c.lower() for c in swe_drills._CLASSES}
    rng = random.Random(3)
    paths = [swe_drills.draw(rng).path for _ in range(500)]
    made_up = [p for p in paths if not set(re.findall(r"[a-z]+", p.removesuffix(".py"))) <= words | {"src"}]
    assert 0.5 < len(made_up) / len(paths) < 0.95
