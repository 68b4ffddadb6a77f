"""Test doubles that ship with the package, so tests run real code paths instead of mocks.

- `echo`: a tool whose output carries `ECHO_STAMP`, a random string made when this module is imported. The
  stamp appears in no prompt, so output that contains it proves the call went through the real tool path
  (server, session, validation) of this process.
- `Counter`: a stateful toolset, one integer per session, for tests of sessions, idempotency and fork.
- `serve_in_thread`: a real uvicorn server on loopback, in a background thread, for integration tests.
- `metric_value`: one sample from a `/metrics` page (Prometheus text).
- `ScriptedPolicy`: a policy that replays scripted assistant turns (a double for the model only).
- `scripted_chat_app`: an OpenAI-compatible chat server with scripted replies (a double for a judge model).
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from agentrl.tool import tool
from agentrl.types import Completion

ECHO_STAMP = secrets.token_hex(8)


@tool
def echo(text: str) -> str:
    """Return the text, stamped so that the caller can prove the tool really ran.

    Args:
        text: The text to echo back.
    """
    return f"echo[{ECHO_STAMP}]: {text}"


class Counter:
    """A toolset holding one integer per session."""

    def __init__(self) -> None:
        self.count = 0

    @tool
    def increment(self, by: int = 1) -> int:
        """Add to the counter and return its new value.

        Args:
            by: How much to add.
        """
        self.count += by
        return self.count

    @tool
    def value(self) -> int:
        """Return the counter's current value."""
        return self.count


@contextlib.contextmanager
def serve_in_thread(app: Any, *, port: int = 0, startup_timeout_s: float = 10.0) -> Iterator[str]:
    """Serve an ASGI app with uvicorn on 127.0.0.1 in a daemon thread; yields its base URL.

    `port=0` picks a free port. The socket is bound before the thread starts, so no other process can take the
    port in between.
    """
    from agentrl.toolserver.thread_server import ThreadServer

    server = ThreadServer(app, port=port, startup_timeout_s=startup_timeout_s)
    try:
        yield server.url
    finally:
        server.stop()


def metric_value(text: str, name: str, **labels: str) -> float:
    """The value of the first sample of `name` with `labels` in Prometheus text, 0 when absent."""
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
    return 0.0


class ScriptedPolicy:
    """A `Policy` that replays scripted assistant turns: a test double for the model, never for our own parts.

    `responses` is either a list of turn texts (turn k of every episode gets `responses[k]`) or a function from the
    decoded prompt to the next turn's text. Each turn is tokenized, closed with the end-of-turn token (the
    tokenizer's, or `end_of_turn`), and given fixed fake logprobs. The turn index is the number of this policy's
    earlier turns the prompt continues, whatever the chat template, so concurrent episodes do not interfere.
    """

    def __init__(
        self,
        tokenizer: Any,
        responses: Sequence[str] | Callable[[str], str],
        *,
        logprob: float = -0.5,
        end_of_turn: int | None = None,
    ):
        self.tokenizer = tokenizer
        self.version = 0
        self.responses = responses
        self.logprob = logprob
        self.calls = 0
        self.end_of_turn = (
            end_of_turn if end_of_turn is not None else tokenizer.convert_tokens_to_ids(tokenizer.eos_token)
        )
        self._turns: set[tuple[int, ...]] = set()

    async def generate(self, prompt_ids: Sequence[int], params: Any) -> Completion:
        self.calls += 1
        prompt = self.tokenizer.decode(list(prompt_ids), skip_special_tokens=False)
        if callable(self.responses):
            text = self.responses(prompt)
        else:
            prompt_ids = tuple(prompt_ids)
            turn = sum(prompt_ids[: len(earlier)] == earlier for earlier in self._turns)
            text = self.responses[min(turn, len(self.responses) - 1)]
        ids = list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        finish = "stop"
        if len(ids) + 1 > params.max_new_tokens:
            ids, finish = ids[: params.max_new_tokens], "length"
        else:
            ids.append(self.end_of_turn)
        self._turns.add((*prompt_ids, *ids))
        text_out = self.tokenizer.decode(ids[:-1] if finish == "stop" else ids, skip_special_tokens=False)
        n = len(ids)
        return Completion(tuple(ids), (self.logprob,) * n, (1.0,) * n, text_out, finish)  # type: ignore[arg-type]

    def sync_weights(self) -> None:
        self.version += 1


def scripted_chat_app(reply: Callable[[list[dict[str, Any]]], Any]) -> Any:
    """An OpenAI-compatible `/v1/chat/completions` server whose replies are `reply(messages)` (a double for a
    judge or chat model). `reply` may be async; if it raises, the request fails with HTTP 500. The request
    bodies are kept in `app.state.requests`."""
    import inspect

    from fastapi import FastAPI
    from fastapi.responses import JSONResponse

    app = FastAPI()
    app.state.requests = []

    @app.post("/v1/chat/completions")
    async def chat(body: dict) -> Any:
        app.state.requests.append(body)
        try:
            text = reply(body["messages"])
            if inspect.isawaitable(text):
                text = await text
        except Exception as e:
            return JSONResponse({"error": {"message": str(e), "type": "server_error"}}, status_code=500)
        return {
            "id": f"chatcmpl-{len(app.state.requests)}",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "scripted"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }

    return app
