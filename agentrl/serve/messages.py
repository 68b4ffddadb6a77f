"""Conversion between the messages OpenAI clients send and the messages the chat template renders.

Clients send tool-call arguments as JSON strings, `content: null` on assistant turns that only call tools, and
content as a list of parts; the training template expects argument objects and text. `template_messages` maps
the first form to the second, the same way for every request, so the gateway renders a client's history exactly
as the scaffold rendered its own. `canonical` is what two messages must share to render to the same text (tool
call ids and names of tool messages are not rendered, so they do not count).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agentrl.rollout.chat import ParsedTurn


def content_text(content: Any) -> str:
    """Text of a message's content: a string, None, or a list of OpenAI content parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            return raw
    return raw


def template_message(message: dict[str, Any]) -> dict[str, Any]:
    """One client message in the form the chat template renders."""
    out: dict[str, Any] = {"role": message["role"], "content": content_text(message.get("content"))}
    if isinstance(message.get("reasoning_content"), str):
        out["reasoning_content"] = message["reasoning_content"]
    if message.get("tool_calls"):
        out["tool_calls"] = [
            {
                "type": "function",
                "id": call.get("id"),
                "function": {
                    "name": call["function"]["name"],
                    "arguments": _arguments(call["function"].get("arguments")),
                },
            }
            for call in message["tool_calls"]
        ]
    if message["role"] == "tool":
        out["tool_call_id"] = message.get("tool_call_id")
        if message.get("name"):
            out["name"] = message["name"]
    return out


def template_messages(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [template_message(m) for m in messages]


def canonical(message: dict[str, Any]) -> tuple[Any, ...]:
    """What decides a template message's rendering (compare messages with this, never with `==`)."""
    calls = tuple(
        (c["function"]["name"], json.dumps(c["function"]["arguments"], sort_keys=True))
        for c in message.get("tool_calls") or ()
    )
    return message["role"], message.get("content") or "", calls


def reply_message(parsed: ParsedTurn, content: str, *, parse_tools: bool) -> dict[str, Any]:
    """The assistant message returned to the client (OpenAI wire format: arguments as JSON strings, reasoning in
    `reasoning_content`); `content` is the turn's text after its reasoning, returned as is when calls are not
    parsed or their markup was malformed."""
    if not parse_tools or parsed.error or not parsed.tool_calls:
        text = content.strip() if (not parse_tools or parsed.error) else parsed.content
        message: dict[str, Any] = {"role": "assistant", "content": text}
    else:
        message = {
            "role": "assistant",
            "content": parsed.content or None,
            "tool_calls": [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                for c in parsed.tool_calls
            ],
        }
    if parsed.reasoning is not None:
        message["reasoning_content"] = parsed.reasoning
    return message
