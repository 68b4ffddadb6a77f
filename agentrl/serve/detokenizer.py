"""`IncrementalDetokenizer`: the text of a growing list of sampled ids, handed out as it becomes stable.

One token need not be one character: a byte-level BPE splits a multi-byte character over several tokens, and a
token may only read right next to its neighbours (SentencePiece strips the space of a text's first token). So
the text of token k is not `decode([k])`. The detokenizer decodes a short window instead: the ids since the last
emission, after the ids of the emission before (their context), and hands out the window's text beyond that
context once it does not end in a replacement character (a character still missing bytes). The pieces
concatenate to `decode(all ids)`, each token is decoded a bounded number of times, and nothing is taken back.
"""

from __future__ import annotations

from typing import Any

_INCOMPLETE = "\ufffd"


class IncrementalDetokenizer:
    """Feed sampled ids one at a time; each `push` returns the text that became stable (often "")."""

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self._context = 0
        """Start of the window: the ids before `_read` decoded as context only."""
        self._read = 0
        """Ids before this index have been handed out."""

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=False)

    def push(self, token_id: int) -> str:
        self.ids.append(token_id)
        context = self._decode(self.ids[self._context : self._read])
        window = self._decode(self.ids[self._context :])
        if len(window) <= len(context) or window.endswith(_INCOMPLETE) or not window.startswith(context):
            return ""
        self._context, self._read = self._read, len(self.ids)
        return window[len(context) :]
