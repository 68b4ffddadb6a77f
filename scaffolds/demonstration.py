"""Building blocks of scripted demonstrations: conversations shaped exactly as the runtime records episodes."""

from __future__ import annotations

import random
from typing import Any

ONSETS = tuple("b c d f g h j k l m n p r s t v w z br ch cr dr fl gr kl pl pr sh st tr".split())
NUCLEI = tuple("a e i o u ai ea io ou".split())
"""Syllables of made-up names: an onset, a nucleus and, sometimes, a consonant closing it."""


def tool_call_messages(
    name: str, arguments: dict[str, Any], result: str, *, call_id: str, content: str = ""
) -> list[dict[str, Any]]:
    """An assistant turn (with `content` before its call) making one tool call, followed by the tool's reply."""
    call = {"type": "function", "id": call_id, "function": {"name": name, "arguments": arguments}}
    return [
        {"role": "assistant", "content": content, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "name": name, "content": result},
    ]


def made_up_name(rng: random.Random, *, min_chars: int = 3, max_chars: int = 10) -> str:
    """A pronounceable made-up name (`brimo`, `tarsek`): demonstrations over such names teach a small policy to
    copy a name from its prompt, where a few dozen real words would let it recall them instead."""
    while True:
        syllables = (
            rng.choice(ONSETS) + rng.choice(NUCLEI) + (rng.choice(ONSETS[:18]) if rng.random() < 0.4 else "")
            for _ in range(rng.randint(1, 3))
        )
        name = "".join(syllables)
        if min_chars <= len(name) <= max_chars:
            return name
