"""`ForbiddenText`: token bans that keep given strings out of what a policy writes (`tool_choice: none`).

A string like `<tool_call>` can be written as one special token or spelled out in pieces (`<`, `tool`, `_call`,
`>`), and a piece may carry text before or after it. So bans are worked out on text: a token is banned when its
own text contains a forbidden string, or when the text written so far ends with the string's first j characters
and the token's text would complete it. Both sets are computed once per tokenizer (one pass over the vocabulary
for each prefix length); at each step only the end of the text is decoded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class ForbiddenText:
    """`forbid(ids)` for `TransformersPolicy.generate`: the ids that would complete one of `texts`."""

    def __init__(self, tokenizer: Any, texts: Sequence[str]):
        self.tokenizer = tokenizer
        self.texts = tuple(t for t in texts if t)
        pieces = tokenizer.batch_decode([[i] for i in range(len(tokenizer))], skip_special_tokens=False)
        self.always = frozenset(i for i, piece in enumerate(pieces) if any(t in piece for t in self.texts))
        """Ids whose own text contains a forbidden string."""
        self.after: dict[str, frozenset[int]] = {}
        """Beginning of a forbidden string → ids that would complete the string after it."""
        for text in self.texts:
            for j in range(1, len(text)):
                begun = text[:j]
                completing = {i for i, piece in enumerate(pieces) if text in begun + piece} - self.always
                self.after[begun] = self.after.get(begun, frozenset()) | completing
        self._tail_tokens = max((len(t) for t in self.texts), default=0)

    def __call__(self, ids: list[int]) -> frozenset[int]:
        if not ids or not self.after:
            return self.always
        # every token decodes to at least one character, so this many ids cover any begun string
        tail = self.tokenizer.decode(ids[-self._tail_tokens :], skip_special_tokens=False)
        banned = self.always
        for begun, completing in self.after.items():
            if completing and tail.endswith(begun):
                banned = banned | completing
        return banned
