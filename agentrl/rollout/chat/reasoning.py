"""Reasoning blocks (`<think>…</think>`): split off a turn before its answer and tool calls are read.

A reasoning model writes its thoughts first and its answer (or tool calls) after the closing marker. Neither the
answer nor the calls may come from the thoughts: an answer scored with the reasoning in front of it fails exact
match, and a `<tool_call>` the model only considered would run. Some templates open the block in the generation
prompt (the sample then starts inside it); others let the model open it, or close an empty one in the prompt to
turn thinking off. The reasoning is kept: it is part of what the policy sampled and trains on.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReasoningMarkers:
    """The markers that open and close a reasoning block."""

    open: str = "<think>"
    close: str = "</think>"

    @classmethod
    def in_template(cls, template: str | None) -> ReasoningMarkers | None:
        """The markers a chat template renders, if it renders any."""
        if template and "</think>" in template:
            return cls()
        return None

    def opened_by(self, prompt_text: str) -> bool:
        """Whether a prompt ends inside an open reasoning block (the sample starts with thoughts)."""
        return prompt_text.rfind(self.open) > prompt_text.rfind(self.close)

    def split(self, text: str, *, starts_inside: bool = False) -> tuple[str | None, str]:
        """(reasoning, the rest) of a sampled turn; reasoning is None when the turn has no block. A block that is
        never closed is all reasoning: the turn has no answer and no calls."""
        head = text.lstrip()
        if not starts_inside:
            if not head.startswith(self.open):
                return None, text
            head = head[len(self.open) :]
        end = head.find(self.close)
        if end < 0:
            return head.strip("\n"), ""
        return head[:end].strip("\n"), head[end + len(self.close) :].lstrip("\n")
