"""Server-sent events for `stream: true` chat requests, in the OpenAI chunk format.

Over a policy that streams its tokens (`TransformersPolicy`), `StreamWriter` sends each choice's turn as it is
sampled: a role chunk, then reasoning (`reasoning_content`) and content deltas as tokens are decoded (text that is
certain only: see `turn_stream.py`; multi-byte characters split over tokens come out whole, see `detokenizer.py`),
the log-probs of the tokens sampled since the previous chunk with each chunk, then at the end of the turn its tool
calls (a delta with index, id, type and name, then the arguments in fragments), the rest of the message and a
closing chunk with the finish reason. With `stream_options.include_usage` a last chunk with no choices carries the
usage (and the `agentrl` token ids), then `data: [DONE]`. Joined, the deltas are exactly the non-streamed message.

Over any other policy (a remote backend, a scripted double) the turn is only known once sampled, and `chunks` cuts
the finished response into the same chunk sequence.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

from agentrl.policy.decode_loop import TokenStep
from agentrl.rollout.chat import ChatFormat
from agentrl.serve.detokenizer import IncrementalDetokenizer
from agentrl.serve.logprobs import token_logprob
from agentrl.serve.turn_stream import TurnStream

CONTENT_CHARS_PER_CHUNK = 16
DONE = "data: [DONE]\n\n"


def _event(head: dict[str, Any], choices: list[dict[str, Any]], **extra: Any) -> str:
    return f"data: {json.dumps({**head, 'choices': choices, **extra})}\n\n"


def error_event(error: BaseException) -> str:
    """An error after the stream began (the status line is sent already): one event the SDK raises on."""
    body = {"message": f"{type(error).__name__}: {error}", "type": "server_error", "param": None, "code": None}
    return f"data: {json.dumps({'error': body})}\n\n"


def chunks(response: dict[str, Any], *, include_usage: bool) -> Iterator[str]:
    """The SSE lines (`data: ...\\n\\n`) that stream a finished `response`."""
    head = {
        "id": response["id"],
        "object": "chat.completion.chunk",
        "created": response["created"],
        "model": response["model"],
        "system_fingerprint": response.get("system_fingerprint"),
    }
    for choice in response["choices"]:
        i, message = choice["index"], choice["message"]
        yield _event(head, [{"index": i, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
        if message.get("reasoning_content"):
            delta = {"reasoning_content": message["reasoning_content"]}
            yield _event(head, [{"index": i, "delta": delta, "finish_reason": None}])
        content = message.get("content") or ""
        for start in range(0, len(content), CONTENT_CHARS_PER_CHUNK):
            delta = {"content": content[start : start + CONTENT_CHARS_PER_CHUNK]}
            yield _event(head, [{"index": i, "delta": delta, "finish_reason": None}])
        for k, call in enumerate(message.get("tool_calls") or ()):
            delta = {"tool_calls": [{"index": k, "id": call["id"], "type": "function", "function": call["function"]}]}
            yield _event(head, [{"index": i, "delta": delta, "finish_reason": None}])
        yield _event(
            head,
            [{"index": i, "delta": {}, "finish_reason": choice["finish_reason"], "logprobs": choice.get("logprobs")}],
        )
    if include_usage:
        yield _event(head, [], usage=response["usage"], agentrl=response.get("agentrl"))
    yield DONE


class _Choice:
    """One choice being streamed: its detokenizer, its turn and the log-probs not sent yet."""

    def __init__(self, tokenizer: Any, chat: ChatFormat, *, parse_tools: bool, stop: tuple[str, ...]):
        self.detokenizer = IncrementalDetokenizer(tokenizer)
        self.turn = TurnStream(chat, parse_tools=parse_tools, stop=stop)
        self.logprobs: list[dict[str, Any]] = []


class StreamWriter:
    """The chunks of a chat request streamed token by token (`n` choices, interleaved by `index`)."""

    def __init__(
        self,
        tokenizer: Any,
        chat: ChatFormat,
        *,
        model: str,
        n: int,
        parse_tools: bool,
        stop: tuple[str, ...] = (),
        logprobs: bool = False,
        top_logprobs: int = 0,
        include_usage: bool = False,
        fingerprint: str | None = None,
    ):
        self.tokenizer = tokenizer
        self.head = {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "system_fingerprint": fingerprint,
        }
        self.choices = [_Choice(tokenizer, chat, parse_tools=parse_tools, stop=stop) for _ in range(n)]
        self.logprobs, self.top_logprobs, self.include_usage = logprobs, top_logprobs, include_usage

    def _chunk(self, i: int, delta: dict[str, Any], finish_reason: str | None = None) -> str:
        choice: dict[str, Any] = {"index": i, "delta": delta, "finish_reason": finish_reason}
        pending = self.choices[i].logprobs
        if self.logprobs:
            choice["logprobs"] = {"content": pending} if pending else None
            self.choices[i].logprobs = []
        return _event(self.head, [choice])

    def opening(self, forced: str = "") -> Iterator[str]:
        """The role chunk of every choice; each turn starts with the `forced` markup (which makes nothing certain
        to show: it opens a call)."""
        for i, choice in enumerate(self.choices):
            yield self._chunk(i, {"role": "assistant", "content": ""})
            for delta in choice.turn.feed(forced):
                yield self._chunk(i, delta)

    def token(self, i: int, step: TokenStep) -> Iterator[str]:
        """The chunks one sampled token of choice `i` makes certain (often none: its text may be held)."""
        choice = self.choices[i]
        if self.logprobs:
            choice.logprobs.append(token_logprob(self.tokenizer, step, self.top_logprobs))
        if step.finish_reason == "stop":  # the end-of-turn token is markup, not text
            return
        text = choice.detokenizer.push(step.token_id)
        for delta in choice.turn.feed(text) if text else ():
            yield self._chunk(i, delta)

    def finish(self, response: dict[str, Any]) -> Iterator[str]:
        """What the finished `response` adds per choice (the rest of its message, its tool calls), the closing
        chunks, the usage chunk when asked, and `[DONE]`."""
        for choice in response["choices"]:
            i = choice["index"]
            for delta in self.choices[i].turn.finish(choice["message"]):
                yield self._chunk(i, delta)
            yield self._chunk(i, {}, choice["finish_reason"])
        if self.include_usage:
            yield _event(self.head, [], usage=response["usage"], agentrl=response.get("agentrl"))
        yield DONE
