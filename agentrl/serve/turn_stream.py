"""`TurnStream`: a turn's text as it is sampled, split into the deltas a streaming chat client may be shown.

The whole turn is read at its end (`ChatFormat.parse`, as for a request that does not stream), so the stream may
only show what no later text can change. While the turn is being sampled:

- reasoning (`reasoning_content`) streams once the turn is known to be inside a reasoning block, up to its close;
- content streams up to the first mark where a tool call could begin (the format's opening, `<tool_call>` or
  `[TOOL_CALLS]`): text that might still become that mark, a stop string or the end of a block is held back, and
  so is trailing whitespace (the message's content is stripped). A format whose call is the whole turn
  (`llama3_json`) holds a turn that opens with `{` until it ends;
- tool calls stream when the turn ends: a call is only certain then (a malformed later call makes the whole
  turn's markup an error, returned as text). Each call goes out as OpenAI's streaming shape: a delta with its
  index, id, type and name, then its arguments in fragments.

`finish(message)` sends what the non-streamed message has beyond what was sent, so a client that joins the deltas
gets exactly the non-streamed message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentrl.rollout.chat import ChatFormat, ToolCallFormat

ARGUMENT_CHARS_PER_CHUNK = 16

CALL_OPENINGS: dict[str, tuple[str, ...]] = {
    "hermes": ("<tool_call>",),
    "qwen3_coder": ("<tool_call>",),
    "mistral": ("[TOOL_CALLS]",),
    "llama3_json": ("<|python_tag|>", '{"name":'),
    "pythonic": ("<|tool_call_start|>",),
}
"""Text that opens a tool call in each format (what `tool_choice: none` forbids)."""

WHOLE_TURN = {"llama3_json"}
"""Formats whose call is the whole turn: whether a turn is a call is known only when it ends."""


def call_openings(tool_format: ToolCallFormat) -> tuple[str, ...]:
    return CALL_OPENINGS.get(tool_format.name, ())


def held(text: str, marks: Sequence[str]) -> int:
    """Length of the longest end of `text` that is the beginning of one of `marks` (or a whole mark)."""
    longest = 0
    for mark in marks:
        for n in range(min(len(mark), len(text)), longest, -1):
            if text.endswith(mark[:n]):
                longest = n
                break
    return longest


def _cut(text: str, marks: Sequence[str]) -> str:
    return text[: len(text) - held(text, marks)]


class TurnStream:
    """Turns the text of one sampled turn, fed as it grows, into `delta`s of chat completion chunks."""

    def __init__(self, chat: ChatFormat, *, parse_tools: bool, stop: Sequence[str] = ()):
        self.reasoning = chat.reasoning
        self.starts_inside = self.reasoning is not None and chat.prompt_opens_reasoning
        self.parse_tools = parse_tools
        self.openings = call_openings(chat.tool_format) if parse_tools else ()
        self.whole_turn = parse_tools and (chat.tool_format.name in WHOLE_TURN or not self.openings)
        self.stop = tuple(s for s in stop if s)
        self.text = ""
        self.sent = {"reasoning_content": "", "content": ""}

    def feed(self, text: str) -> list[dict[str, Any]]:
        """Deltas that `text`, appended to the turn, makes certain."""
        self.text += text
        return self._deltas(self._certain())

    def finish(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        """The rest of the non-streamed `message`: reasoning and content not sent yet, then its tool calls."""
        final = {key: message.get(key) or "" for key in self.sent}
        out = self._deltas(final)
        for k, call in enumerate(message.get("tool_calls") or ()):
            function = call["function"]
            named = {"name": function["name"], "arguments": ""}
            out.append({"tool_calls": [{"index": k, "id": call["id"], "type": "function", "function": named}]})
            arguments = function["arguments"]
            for start in range(0, len(arguments), ARGUMENT_CHARS_PER_CHUNK):
                piece = arguments[start : start + ARGUMENT_CHARS_PER_CHUNK]
                out.append({"tool_calls": [{"index": k, "function": {"arguments": piece}}]})
        return out

    def _deltas(self, certain: dict[str, str]) -> list[dict[str, Any]]:
        out = []
        for key, text in certain.items():
            sent = self.sent[key]
            if len(text) > len(sent) and text.startswith(sent):
                out.append({key: text[len(sent) :]})
                self.sent[key] = text
        return out

    # --- what the text so far makes certain --------------------------------------------------------------

    def _certain(self) -> dict[str, str]:
        text = _cut(self.text, self.stop)  # a stop string is never shown, nor its beginning
        rest = text
        if self.reasoning is not None:
            head = text.lstrip()
            if not self.starts_inside:
                if self.reasoning.open.startswith(head):
                    return {}  # nothing yet, or the opening of a block
                if not head.startswith(self.reasoning.open):
                    return self._content(text)
                head = head[len(self.reasoning.open) :]
            end = head.find(self.reasoning.close)
            if end < 0:
                return {"reasoning_content": _cut(head, [self.reasoning.close]).lstrip("\n").rstrip()}
            rest = head[end + len(self.reasoning.close) :].lstrip("\n")
            return {"reasoning_content": head[:end].strip("\n"), **self._content(rest)}
        return self._content(rest)

    def _content(self, text: str) -> dict[str, str]:
        if not self.parse_tools:
            return {"content": text.strip()}
        if self.whole_turn:
            return self._whole_turn_content(text)
        starts = [i for i in (text.find(mark) for mark in self.openings) if i >= 0]
        before = text[: min(starts)] if starts else _cut(text, self.openings)
        return {"content": before.strip()}

    def _whole_turn_content(self, text: str) -> dict[str, str]:
        """A turn that is one call or none: content is certain once the turn cannot be a call any more."""
        stripped = text.strip()
        if not self.openings:
            return {}
        if any(mark.startswith(stripped) or stripped.startswith(mark) for mark in self.openings):
            return {}
        body = stripped.removeprefix("<|python_tag|>").lstrip()
        if not body or body.startswith("{"):
            return {}
        return {"content": stripped}
