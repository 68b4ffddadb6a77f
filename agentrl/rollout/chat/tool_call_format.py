"""`ToolCallFormat`, the base of every tool-call format, and `ParsedTurn`, what reading a turn gives.

The formats themselves are in `tool_formats.py` (and `pythonic_format.py`); `tool_formats.FORMATS` names them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agentrl.json_values import JSONValueError
from agentrl.types import ToolCall


@dataclass(frozen=True)
class ParsedTurn:
    """What a policy turn said: free text, tool calls, reasoning, or why its tool-call markup was malformed."""

    content: str
    tool_calls: tuple[ToolCall, ...]
    error: str | None = None
    reasoning: str | None = None
    """The turn's reasoning block, when it wrote one (kept apart from `content`)."""


class ToolCallFormat:
    """One family's tool-call markup. Subclasses implement `parse_calls`."""

    name = ""
    call_stop: str | None = None
    """A string that closes one call: sampling may stop there when calls go one per turn."""
    max_calls_per_turn: int | None = None
    example = ""
    """One call written in this format, for the note that tells the policy what was malformed."""

    def parse(self, text: str, *, id_prefix: str = "call", schemas: Any = None) -> ParsedTurn:
        """Read `text` (no reasoning in it); never raises."""
        try:
            content, calls, error = self.parse_calls(text, id_prefix, _parameter_types(schemas))
        except JSONValueError as e:
            return ParsedTurn(text.strip(), (), str(e))
        if error is None and self.max_calls_per_turn is not None and len(calls) > self.max_calls_per_turn:
            error = f"this model calls at most {self.max_calls_per_turn} tool per turn, not {len(calls)}"
        return ParsedTurn(content, () if error else tuple(calls), error)

    def parse_calls(
        self, text: str, id_prefix: str, types: dict[str, dict[str, str]]
    ) -> tuple[str, list[ToolCall], str | None]:
        raise NotImplementedError

    def call_id(self, id_prefix: str, index: int) -> str:
        return f"{id_prefix}_{index}"

    def forced_prefix(self, name: str | None = None) -> str:
        """The markup a turn must start with to be a call (to `name`, when given): what `tool_choice` required
        or named forces, as guided decoding would constrain it."""
        raise NotImplementedError

    def write(self, name: str, arguments: dict[str, Any]) -> str:
        """One call as a model of this family writes it: the forced prefix, then the arguments, then the closing
        markup (what `parse` reads back)."""
        return self.forced_prefix(name) + json.dumps(arguments) + self.closing

    closing = ""
    """What follows a call's JSON arguments."""


def _parameter_types(schemas: Any) -> dict[str, dict[str, str]]:
    """Tool name → parameter name → JSON-schema type, from OpenAI function-tool schemas."""
    out: dict[str, dict[str, str]] = {}
    for schema in schemas or ():
        function = schema.get("function", schema) if isinstance(schema, dict) else {}
        properties = (function.get("parameters") or {}).get("properties") or {}
        out[str(function.get("name"))] = {
            key: spec.get("type") for key, spec in properties.items() if isinstance(spec, dict)
        }
    return out
