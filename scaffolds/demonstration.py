"""Building blocks of scripted demonstrations: conversations shaped exactly as the runtime records episodes."""

from __future__ import annotations

from typing import Any


def tool_call_messages(
    name: str, arguments: dict[str, Any], result: str, *, call_id: str, content: str = ""
) -> list[dict[str, Any]]:
    """An assistant turn (with `content` before its call) making one tool call, followed by the tool's reply."""
    call = {"type": "function", "id": call_id, "function": {"name": name, "arguments": arguments}}
    return [
        {"role": "assistant", "content": content, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "name": name, "content": result},
    ]
