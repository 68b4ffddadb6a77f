"""Server-sent events for `stream: true` chat requests, in the OpenAI chunk format.

The sampler finishes a turn before it is parsed for tool calls, so the stream is cut from the finished
response: a role chunk, content chunks, one chunk per tool call (id, name and the whole arguments string), a
closing chunk with the finish reason, an optional usage chunk, and `data: [DONE]`. Clients that assemble deltas
get exactly the non-streamed message.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

CONTENT_CHARS_PER_CHUNK = 16


def chunks(response: dict[str, Any], *, include_usage: bool) -> Iterator[str]:
    """The SSE lines (`data: ...\\n\\n`) that stream `response`."""
    head = {
        "id": response["id"],
        "object": "chat.completion.chunk",
        "created": response["created"],
        "model": response["model"],
        "system_fingerprint": response.get("system_fingerprint"),
    }

    def event(choices: list[dict[str, Any]], **extra: Any) -> str:
        return f"data: {json.dumps({**head, 'choices': choices, **extra})}\n\n"

    for choice in response["choices"]:
        i, message = choice["index"], choice["message"]
        yield event([{"index": i, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
        content = message.get("content") or ""
        for start in range(0, len(content), CONTENT_CHARS_PER_CHUNK):
            delta = {"content": content[start : start + CONTENT_CHARS_PER_CHUNK]}
            yield event([{"index": i, "delta": delta, "finish_reason": None}])
        for k, call in enumerate(message.get("tool_calls") or ()):
            delta = {"tool_calls": [{"index": k, "id": call["id"], "type": "function", "function": call["function"]}]}
            yield event([{"index": i, "delta": delta, "finish_reason": None}])
        yield event(
            [{"index": i, "delta": {}, "finish_reason": choice["finish_reason"], "logprobs": choice.get("logprobs")}]
        )
    if include_usage:
        yield event([], usage=response["usage"], agentrl=response.get("agentrl"))
    yield "data: [DONE]\n\n"
