"""Stop strings decided from token ids agree with the rule they stand for: the decoded tail ends with the string."""

from __future__ import annotations

import random

import pytest

from agentrl.policy.stop_strings import StopStrings
from agentrl.testing.families import family_tokenizer

pytestmark = pytest.mark.unit

STOPS = [("</tool_call>",), ("\n\n", "Observation:"), ("```",), ("é!", "→")]


def old_rule(tokenizer, stop, ids) -> bool:
    """What the sampler did at every step before: decode the last 8 ids, test the text's end."""
    tail = tokenizer.decode(ids[-8:], skip_special_tokens=False)
    return any(tail.endswith(s) for s in stop)


def streams(tokenizer, stop, n: int, seed: int):
    """Random id streams rich in the stop strings' own pieces (whole, split, and mid-word)."""
    rng = random.Random(seed)
    pieces = []
    for s in stop:
        for text in (s, s[:-1], s[-1:], "x" + s, s + " ", s[: len(s) // 2]):
            pieces.append(tokenizer(text, add_special_tokens=False)["input_ids"])
        pieces += [[i] for i in tokenizer(s, add_special_tokens=False)["input_ids"]]
    # single bytes of multi-byte characters, as byte-level tokenizers split them
    pieces += [tokenizer("é→ü", add_special_tokens=False)["input_ids"][:k] for k in (1, 2, 3)]
    for _ in range(n):
        ids: list[int] = []
        while len(ids) < 24:
            ids += rng.choice(pieces) if rng.random() < 0.6 else [rng.randrange(len(tokenizer))]
        yield ids


@pytest.mark.parametrize("family", ["qwen3", "llama3", "mistral"])
def test_stop_strings_from_ids_agree_with_decoding_on_random_streams(family):
    tokenizer = family_tokenizer(family)
    stops = StopStrings(tokenizer)
    checks = hits = 0
    for k, stop in enumerate(STOPS):
        for ids in streams(tokenizer, stop, 150, seed=k):
            for end in range(1, len(ids) + 1):
                expected = old_rule(tokenizer, stop, ids[:end])
                assert stops.hit(stop, ids[:end]) == expected, (stop, ids[:end])
                checks += 1
                hits += expected
    assert hits > 100  # the streams really end with stop strings, often
    assert stops.decodes < 0.6 * checks  # and most checks were settled without decoding


def test_a_row_without_stop_strings_never_decodes(tiny_tokenizer):
    stops = StopStrings(tiny_tokenizer)
    assert not stops.hit((), [1, 2, 3]) and stops.decodes == 0
