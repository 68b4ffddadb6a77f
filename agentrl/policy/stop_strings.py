"""`StopStrings`: whether a row's text ends with one of its stop strings, decided from token ids.

The rule is the one the sampler always had: a row stops with `tool_call` when the decoded text of its last
`TAIL_TOKENS` ids ends with one of its stop strings. Decoding every row at every step costs more than the step,
so a table answers first: the text can only have come to end with a string if the last token's own text holds
the string's last character, or is empty, or is an incomplete UTF-8 sequence (shown as U+FFFD); any other token
leaves the text ending in a character of its own that is not the string's last. Only after a token in the table
is the tail decoded and the rule applied, so the outcome is the rule's exactly, at the cost of a decode on a few
percent of the tokens. The table (one decode of every id, once per tokenizer) is built at the first stop string.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

TAIL_TOKENS = 8
"""Ids decoded to read the end of a row's text."""


def decoded_tail_ends_with(tokenizer: Any, stop: Sequence[str], ids: Sequence[int]) -> bool:
    """The rule itself: the text of the last `TAIL_TOKENS` ids ends with one of `stop`."""
    tail = tokenizer.decode(list(ids[-TAIL_TOKENS:]), skip_special_tokens=False)
    return any(tail.endswith(s) for s in stop if s)


class StopStrings:
    """`hit(stop, ids)`: the rule above, deciding from ids alone on most tokens."""

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        self._pieces: list[str] | None = None
        self._enders: dict[str, frozenset[int]] = {}
        """A stop string's last character → ids after which the text may end with it."""
        self.decodes = 0

    def hit(self, stop: Sequence[str], ids: Sequence[int]) -> bool:
        if not stop or not ids:
            return False
        last = ids[-1]
        if not any(last in self._ending(s[-1]) for s in stop if s):
            return False
        self.decodes += 1
        return decoded_tail_ends_with(self.tokenizer, stop, ids)

    def _ending(self, char: str) -> frozenset[int]:
        found = self._enders.get(char)
        if found is None:
            if self._pieces is None:
                ids = [[i] for i in range(len(self.tokenizer))]
                self._pieces = self.tokenizer.batch_decode(ids, skip_special_tokens=False)
            found = frozenset(i for i, p in enumerate(self._pieces) if char in p or not p or "\ufffd" in p)
            self._enders[char] = found
        return found
