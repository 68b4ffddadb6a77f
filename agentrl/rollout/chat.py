"""Chat-template plumbing for token-exact multi-turn rollouts.

Three jobs: render the opening prompt to ids; turn the messages appended after a policy turn (tool results, a
correction) into the exact ids that follow the sampled tokens; and parse Qwen/Hermes
`<tool_call>{"name": ..., "arguments": {...}}</tool_call>` markup without ever raising. The observation ids are
the template's rendering of the new messages, taken as a text delta between two renderings and tokenized on
its own: every delta starts right after a special token, so no BPE merge can cross the boundary and the
concatenation equals what the template would produce for the whole conversation (`template_mismatch` checks).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentrl.types import ToolCall, Trajectory

_OPEN, _CLOSE = "<tool_call>", "</tool_call>"
_UNCLOSED = "unclosed <tool_call>: every <tool_call> needs a matching </tool_call>"
_DECODER = json.JSONDecoder()
_WHITESPACE = re.compile(r"\s*")


@dataclass(frozen=True)
class ParsedTurn:
    """What a policy turn said: free text, tool calls, or why its markup was malformed."""

    content: str
    tool_calls: tuple[ToolCall, ...]
    error: str | None = None


def parse_tool_calls(text: str, *, id_prefix: str = "call") -> ParsedTurn:
    """Parse `<tool_call>` blocks out of `text`. Never raises; malformed markup comes back as `error`.

    Each block is read as one JSON value followed by `</tool_call>`, so markup quoted inside a JSON string (code
    that prints a tool call, say) does not end the block early. Text between and after blocks is ignored.

    >>> parse_tool_calls('<tool_call>\\n{"name": "f", "arguments": {"x": 1}}\\n</tool_call>').tool_calls[0].arguments
    {'x': 1}
    >>> parse_tool_calls('<tool_call>{"name": "f"').error
    'unclosed <tool_call>: every <tool_call> needs a matching </tool_call>'
    """
    start = text.find(_OPEN)
    content = (text if start < 0 else text[:start]).strip()
    if _CLOSE in (text if start < 0 else text[:start]):
        return ParsedTurn(content, (), "found </tool_call> without an opening <tool_call>")
    calls: list[ToolCall] = []
    while start >= 0:
        call, end, error = _parse_block(text, start + len(_OPEN), f"{id_prefix}_{len(calls)}")
        if error:
            return ParsedTurn(content, (), error if end < 0 else f"tool call {len(calls) + 1}: {error}")
        calls.append(call)  # type: ignore[arg-type]
        start = text.find(_OPEN, end)
        if _CLOSE in text[end : len(text) if start < 0 else start]:
            return ParsedTurn(content, (), "found </tool_call> without an opening <tool_call>")
    return ParsedTurn(content, tuple(calls))


def _parse_block(text: str, pos: int, call_id: str) -> tuple[ToolCall | None, int, str | None]:
    """The call whose JSON starts at or after `pos`, and the index after its `</tool_call>` (-1: unclosed)."""
    close = text.find(_CLOSE, pos)
    if close < 0:
        return None, -1, _UNCLOSED
    body = _WHITESPACE.match(text, pos).end()  # type: ignore[union-attr]
    try:
        data, json_end = _DECODER.raw_decode(text, body)
    except (json.JSONDecodeError, RecursionError) as e:
        return None, close, f"invalid JSON ({e.msg if hasattr(e, 'msg') else e}) in {text[body:close].strip()[:80]!r}"
    after = _WHITESPACE.match(text, json_end).end()  # type: ignore[union-attr]
    if not text.startswith(_CLOSE, after):
        if text.find(_CLOSE, after) < 0:
            return None, -1, _UNCLOSED
        return None, close, f"unexpected text after the JSON object: {text[after : after + 40]!r}"
    end = after + len(_CLOSE)
    if not isinstance(data, dict):
        return None, end, 'expected a JSON object {"name": ..., "arguments": {...}}'
    name = data.get("name")
    if not isinstance(name, str) or not name:
        return None, end, 'missing "name" (a string)'
    arguments = data.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except (json.JSONDecodeError, RecursionError):
            return None, end, f'"arguments" of {name} is a string that is not JSON'
    if not isinstance(arguments, dict):
        return None, end, f'"arguments" of {name} must be a JSON object'
    return ToolCall(id=call_id, name=name, arguments=arguments), end, None


def assistant_message(parsed: ParsedTurn, raw_text: str) -> dict[str, Any]:
    """The OpenAI-format assistant message for a parsed turn (raw text when the markup was malformed)."""
    if parsed.error or not parsed.tool_calls:
        return {"role": "assistant", "content": raw_text.strip() if parsed.error else parsed.content}
    return {
        "role": "assistant",
        "content": parsed.content,
        "tool_calls": [
            {"type": "function", "id": c.id, "function": {"name": c.name, "arguments": c.arguments}}
            for c in parsed.tool_calls
        ],
    }


class ChatRenderer:
    """Renders conversations with a tokenizer's chat template, to text and to ids."""

    def __init__(self, tokenizer: Any, tools: Sequence[dict[str, Any]] | None = None):
        self.tokenizer = tokenizer
        self.tools = list(tools) if tools else None
        self.eos_text: str = tokenizer.eos_token

    def text(self, messages: Sequence[dict[str, Any]], *, add_generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            list(messages), tools=self.tools, tokenize=False, add_generation_prompt=add_generation_prompt
        )

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt_ids(self, messages: Sequence[dict[str, Any]]) -> list[int]:
        return self.encode(self.text(messages, add_generation_prompt=True))

    def observation_ids(
        self,
        history: Sequence[dict[str, Any]],
        new_messages: Sequence[dict[str, Any]],
        *,
        sampled_eos: bool,
        add_generation_prompt: bool = True,
    ) -> list[int]:
        """Ids that follow a sampled turn: the rest of its end-of-turn markup, then `new_messages` rendered,
        then (optionally) the next generation prompt. `history` ends with that turn's assistant message."""
        before = self.text(history, add_generation_prompt=False)
        after = self.text(list(history) + list(new_messages), add_generation_prompt=add_generation_prompt)
        if not after.startswith(before):
            raise ValueError("chat template is not prefix-preserving for appended messages")
        end = before.rfind(self.eos_text)
        closing = before[end + len(self.eos_text) :] if end >= 0 else ""
        return self.encode(("" if sampled_eos else self.eos_text) + closing + after[len(before) :])


@dataclass(frozen=True)
class Mismatch:
    """Where a trajectory's ids diverge from the chat template's rendering of its messages."""

    position: int
    expected: str
    got: str


def template_mismatch(renderer: ChatRenderer, trajectory: Trajectory) -> Mismatch | None:
    """Check the token-exact rule: rendering the final conversation must reproduce the trajectory's ids.

    The rendering may extend past the ids (the template's closing markup after the last turn, or tool results of
    a final turn that were never fed back); anything else is reported with a little decoded context.
    """
    rendered = renderer.encode(renderer.text(trajectory.messages, add_generation_prompt=False))
    ids = trajectory.token_ids
    for i, (a, b) in enumerate(zip(rendered, ids, strict=False)):
        if a != b:
            decode = renderer.tokenizer.decode
            return Mismatch(i, decode(rendered[i : i + 8]), decode(ids[i : i + 8]))
    if len(ids) > len(rendered):
        return Mismatch(len(rendered), "", renderer.tokenizer.decode(ids[len(rendered) : len(rendered) + 8]))
    return None
