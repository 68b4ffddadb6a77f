"""A chat-completions policy for API models: native OpenAI tool calls, through the openai SDK or litellm.

Hosted models neither take token-id prompts nor report the ids they sampled, so this backend speaks messages:
`chat(messages, tools)` returns the assistant message with its `tool_calls`, the token usage and the latency.
With a `base_url` the request goes through the openai SDK to that OpenAI-compatible server, the model name as
given (`Qwen/Qwen3-4B` is a model there, not a litellm provider route). Without one, names of the form
`provider/model` (`anthropic/claude-…`, `gemini/…`) go through litellm (`import_litellm`, which keeps litellm off
the network at import) and plain names through the openai SDK to OpenAI. Retries (with exponential backoff and
jitter, honouring `Retry-After`) cover rate limits and transport failures only: a 400 or a 500 is an answer, not
a hiccup, and is raised at once. Each attempt has its own timeout.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class ChatReply:
    """One assistant turn from a chat endpoint."""

    message: dict[str, Any]
    """The assistant message in OpenAI format (`content`, optional `tool_calls` with JSON-string arguments)."""
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    attempts: int = 1


def is_retryable(error: BaseException) -> bool:
    """Rate limits (429) and transport failures (connection errors, timeouts), from openai or litellm."""
    import openai

    if isinstance(error, (openai.RateLimitError, openai.APIConnectionError)):  # APITimeoutError included
        return True
    status = getattr(error, "status_code", None)
    if status == 429:
        return True
    name = type(error).__name__
    return name in ("RateLimitError", "APIConnectionError", "Timeout", "APITimeoutError") and status in (None, 429)


def retry_after_s(error: BaseException) -> float | None:
    response = getattr(error, "response", None)
    value = getattr(response, "headers", {}).get("retry-after") if response is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


async def with_retries(
    call: Callable[[], Awaitable[T]], *, max_retries: int, backoff_s: float, max_backoff_s: float = 30.0
) -> tuple[T, int]:
    """`await call()` with retries on retryable errors; returns (result, attempts)."""
    for attempt in range(max_retries + 1):
        try:
            return await call(), attempt + 1
        except Exception as e:
            if attempt == max_retries or not is_retryable(e):
                raise
            delay = retry_after_s(e) or min(max_backoff_s, backoff_s * 2**attempt) * (0.5 + random.random())
            await asyncio.sleep(delay)
    raise AssertionError("unreachable")


def uses_litellm(model: str, base_url: str | None = None) -> bool:
    """Whether a request goes through litellm: only without a `base_url`, for `provider/model` names (not local
    paths, not plain names). With a `base_url` the server is OpenAI-compatible and the name is its own."""
    if base_url:
        return False
    return "/" in model and not Path(model).exists() and not model.startswith(("/", "."))


def import_litellm() -> Any:
    """litellm, imported with its bundled model cost map. Every import of litellm in agentrl goes through here:
    litellm otherwise fetches the map from the internet when first imported (seconds of retries and warnings
    offline). The switch is read at import, so it is set first; a value the user set stays."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True  # its "Give Feedback / Get Help" banner on every failed request
    return litellm


class OpenAIChatPolicy:
    """Chat completions with native tool calls against an OpenAI-compatible endpoint or a litellm provider."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        max_retries: int = 4,
        backoff_s: float = 1.0,
        extra_headers: dict[str, str] | None = None,
    ):
        self.model = model
        self.base_url = base_url
        self.explicit_api_key = api_key  # for litellm: without one it reads the provider's own ($ANTHROPIC_API_KEY)
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.extra_headers = extra_headers or {}
        self.litellm = uses_litellm(model, base_url)
        self.version = 0
        self._client: Any = None

    async def chat(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]] | None = None,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        max_tokens: int = 512,
        seed: int | None = None,
    ) -> ChatReply:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": list(messages),
            "temperature": temperature,
            "top_p": top_p,
            "max_tokens": max_tokens,
        }
        if tools:
            kwargs["tools"] = list(tools)
        if seed is not None:
            kwargs["seed"] = seed
        start = time.perf_counter()
        response, attempts = await with_retries(
            lambda: self._create(kwargs), max_retries=self.max_retries, backoff_s=self.backoff_s
        )
        choice = response.choices[0]
        message = choice.message.model_dump(exclude_none=True)
        message = {k: v for k, v in message.items() if k in ("role", "content", "tool_calls")}
        message.setdefault("content", None)
        for call in message.get("tool_calls") or ():
            call.setdefault("type", "function")
        usage = response.usage
        return ChatReply(
            message,
            choice.finish_reason or "stop",
            getattr(usage, "prompt_tokens", 0) or 0,
            getattr(usage, "completion_tokens", 0) or 0,
            time.perf_counter() - start,
            attempts,
        )

    async def _create(self, kwargs: dict[str, Any]) -> Any:
        if self.litellm:
            return await import_litellm().acompletion(
                **kwargs,
                api_key=self.explicit_api_key,
                timeout=self.timeout_s,
                num_retries=0,
                extra_headers=self.extra_headers or None,
            )
        if self._client is None:
            from openai import AsyncOpenAI

            self._client = AsyncOpenAI(
                base_url=self.base_url,
                api_key=self.api_key,
                timeout=self.timeout_s,
                max_retries=0,
                default_headers=self.extra_headers or None,
            )
        return await self._client.chat.completions.create(**kwargs)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None
