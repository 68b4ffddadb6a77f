"""Reading OpenAI request bodies into sampling parameters, and errors in the OpenAI error format."""

from __future__ import annotations

from typing import Any

from agentrl.errors import InputError
from agentrl.protocols import SamplingParams

MAX_CHOICES = 16


class RequestError(InputError):
    """A malformed or unsatisfiable request: answered with 4xx and an OpenAI-style error body."""

    def __init__(
        self, message: str, *, status: int = 400, code: str = "invalid_request_error", param: str | None = None
    ):
        super().__init__(message)
        self.status, self.code, self.param = status, code, param

    def body(self) -> dict[str, Any]:
        return {"error": {"message": str(self), "type": self.code, "param": self.param, "code": self.code}}


def _number(body: dict[str, Any], name: str, default: float, low: float, high: float) -> float:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not low <= value <= high:
        raise RequestError(f"{name} must be a number in [{low}, {high}], got {value!r}", param=name)
    return float(value)


def choices_of(body: dict[str, Any]) -> int:
    n = body.get("n") or 1
    if not isinstance(n, int) or not 1 <= n <= MAX_CHOICES:
        raise RequestError(f"n must be an integer in [1, {MAX_CHOICES}]", param="n")
    return n


def stop_strings(body: dict[str, Any]) -> tuple[str, ...]:
    """The request's `stop` strings (a string or a list of them)."""
    stop = body.get("stop") or ()
    stop = (stop,) if isinstance(stop, str) else tuple(stop)
    if not all(isinstance(s, str) for s in stop):
        raise RequestError("stop must be a string or a list of strings", param="stop")
    return stop


def sampling_params(
    body: dict[str, Any], *, prompt_tokens: int, context_tokens: int, default_max_tokens: int, choice: int = 0
) -> SamplingParams:
    """Sampling parameters of one choice; `max_tokens` is cut to what the context window has left."""
    room = context_tokens - prompt_tokens
    if room <= 0:
        raise RequestError(
            f"the prompt has {prompt_tokens} tokens; this model's context window is {context_tokens}",
            code="context_length_exceeded",
            param="messages",
        )
    limit = body.get("max_completion_tokens") or body.get("max_tokens") or default_max_tokens
    if not isinstance(limit, int) or limit < 1:
        raise RequestError("max_tokens must be a positive integer", param="max_tokens")
    stop = stop_strings(body)
    seed = body.get("seed")
    if seed is not None and not isinstance(seed, int):
        raise RequestError("seed must be an integer", param="seed")
    return SamplingParams(
        max_new_tokens=min(limit, room),
        temperature=_number(body, "temperature", 1.0, 0.0, 2.0),
        top_p=_number(body, "top_p", 1.0, 0.0, 1.0) or 1.0,
        stop=stop,
        seed=None if seed is None else seed + choice,
    )
