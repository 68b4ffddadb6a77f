"""Echo drills: conversations in which the assistant repeats each user message exactly, to teach copying.

The easy tiers of the terminal, GUI and SWE scaffolds are mostly copying: a name, a label, a path or a Python
expression the prompt spells out goes into a tool call. A model of a few layers warm-started on a few thousand
demonstrations of those tasks recalls the strings it saw instead (held-out names come out garbled); it copies
strings it never saw only once it has an induction circuit (attend to where the current token occurred in the
prompt, emit what followed it). Dense copying forms that circuit quickly, so the tiny policy's build runs a copy
stage on these drills before the scaffold demonstrations.

A drill has 2-4 rounds, each user message a string the assistant repeats: strings of random pieces of the
tokenizer's vocabulary (every token has to be copied, none can be recalled), or realistic ones: made-up names,
paths, shell commands and small Python expressions. From a policy that has never copied, dense drills of random
pieces barely move the loss; single-round drills of realistic strings behind a lead-in ("Repeat exactly: ...")
come first (`lead_in_drill`), and the circuit forms on the dense ones after them.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from agentrl.scaffolds.demonstration import made_up_name

SYSTEM_PROMPT = "Repeat the text the user gives, exactly."
LEAD_INS = ("Repeat exactly: ", "Copy this text: ", "Say back: ")
MIN_LEAD_IN_CHARS = 12
"""Strings of a lead-in drill are extended with more parts until about this long."""
ROUNDS = (2, 4)
"""Fewest and most rounds of a drill."""
PIECES_PER_STRING = (4, 24)
"""Fewest and most vocabulary pieces in a random-pieces string."""
MIN_REALISTIC_CHARS = 30
"""Realistic strings are extended with more parts until about this long."""


def vocabulary_pieces(tokenizer: Any) -> list[str]:
    """The printable pieces of a tokenizer's vocabulary (no added tokens such as chat markers, no line breaks
    or blanks)."""
    added = set(tokenizer.get_added_vocab().values())
    pieces = (tokenizer.decode([i]) for i in range(len(tokenizer)) if i not in added)
    return [p for p in pieces if p.strip() and "\ufffd" not in p and "\n" not in p]


def random_pieces(rng: random.Random, pieces: Sequence[str]) -> str:
    return "".join(rng.choice(pieces) for _ in range(rng.randint(*PIECES_PER_STRING)))


def realistic_part(rng: random.Random) -> str:
    """A made-up name or a few, a path, a shell command, or a small Python expression."""
    from agentrl.tiny.build.swe_expressions import Gen, render

    r = rng.random()
    if r < 0.3:
        return " ".join(made_up_name(rng) for _ in range(rng.randint(1, 4)))
    if r < 0.55:
        gen = Gen(rng, rng.random() < 0.5)
        tree = rng.choice([gen.operand, gen.cond, gen.text, gen.seq])(2)
        return render(tree, rng.choice(['"', "'"]))
    if r < 0.75:
        parts = "/".join(made_up_name(rng) for _ in range(rng.randint(1, 3)))
        return parts + rng.choice([".py", ".txt", ".md", ""])
    command = rng.choice(["mkdir ", "touch ", "cat ", "rm -r ", "echo '"])
    return command + made_up_name(rng) + rng.choice(["", ".txt", ".log", ".sh"])


def realistic(rng: random.Random) -> str:
    text = realistic_part(rng)
    while len(text) < MIN_REALISTIC_CHARS and rng.random() < 0.8:
        text += " " + realistic_part(rng)
    return text


def drill(rng: random.Random, pieces: Sequence[str], *, realistic_share: float = 2 / 3) -> list[dict[str, Any]]:
    """One drill: every round's strings are realistic (with probability `realistic_share`) or random pieces."""
    real = rng.random() < realistic_share
    messages = [{"role": "system", "content": SYSTEM_PROMPT}]
    for _ in range(rng.randint(*ROUNDS)):
        text = realistic(rng) if real else random_pieces(rng, pieces)
        messages += [{"role": "user", "content": text}, {"role": "assistant", "content": text}]
    return messages


def lead_in_drill(rng: random.Random) -> list[dict[str, Any]]:
    """One round: the user asks for a realistic string behind a lead-in, the assistant gives the string alone."""
    text = realistic_part(rng)
    while len(text) < MIN_LEAD_IN_CHARS and rng.random() < 0.7:
        text += " " + realistic_part(rng)
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": rng.choice(LEAD_INS) + text},
        {"role": "assistant", "content": text},
    ]
