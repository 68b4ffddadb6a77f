"""`LocalToolClient`: the `ToolBackend` of a tool server in this process, called directly instead of over HTTP.

    tools = LocalToolClient(ToolSessions(scaffold.toolsets(), config=config.tool_server))

A run with no `tool_servers` keeps its tool server in its own process and event loop. Reaching it through
`httpx.ASGITransport` and FastAPI costs about 1 ms of the event loop's CPU a request, and an episode makes two
requests more than it makes tool calls (open, close): CPU that competes with the sampler (on the code scaffold's
calculator workload, 115 requests a step and 13% of the step). This client calls the `ToolSessions` methods the
HTTP routes call, so sessions, admission, limits, sandboxes, forks and call de-duplication are the server's own;
what it leaves out is the HTTP layer (JSON on the wire, bearer tokens, transport retries).

It answers as `ToolClient` does: arguments that cannot travel as JSON are a `bad_arguments` result; a refusal for
load (the server's 503: session limit, admission queue full) is retried with the same back-off and, when it
persists, raises `ToolServerUnavailable`; an unknown session raises `SessionNotFound`; any other refusal or failure
of the server raises `ToolServerError` (an `InfraError`: the episode ends as `infra_error`, never a zero reward).
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from agentrl.errors import InfraError, SessionNotFound, ToolServerError, ToolServerUnavailable
from agentrl.json_values import JSONValueError, check_encodable
from agentrl.toolserver.sessions import SessionError, ToolSessions
from agentrl.types import ToolCall, ToolResult

T = TypeVar("T")
REFUSED = 503


class LocalToolClient:
    """A `ToolBackend` over an in-process `ToolSessions`."""

    def __init__(self, server: ToolSessions, *, retries: int = 3, backoff_s: float = 0.25) -> None:
        self.server, self.retries, self.backoff_s = server, retries, backoff_s

    async def schemas(self, names: Sequence[str] | None = None) -> list[dict[str, Any]]:
        return await self._ask(lambda: _ready(self.server.schemas(list(names) if names else None)))

    async def open_session(self, tools: Sequence[str] | None = None, *, network: bool = False) -> LocalToolSession:
        session = await self._ask(lambda: self.server.open_session(tools, network=network))
        return LocalToolSession(self, session.id)

    async def aclose(self) -> None:
        """Close every session and release what the server holds (sandboxes, toolset teardown)."""
        await self.server.close_all()

    async def _ask(self, request: Callable[[], Awaitable[T]]) -> T:
        """`request()`, retried while the server refuses it for load; its errors as the HTTP client's."""
        for attempt in range(self.retries + 1):
            if attempt:
                await asyncio.sleep(self.backoff_s * 2 ** (attempt - 1) * random.uniform(0.5, 1.5))
            try:
                return await request()
            except SessionError as error:
                if error.status == REFUSED:
                    refusal = error
                    continue
                if error.status == 404:
                    raise SessionNotFound(str(error), status_code=404) from error
                message = f"the in-process tool server refused: {error}"
                raise ToolServerError(message, status_code=error.status) from error
            except InfraError:
                raise
            except Exception as error:  # what the app would answer with a 500
                raise ToolServerError(f"the in-process tool server failed: {type(error).__name__}: {error}") from error
        raise ToolServerUnavailable(f"the in-process tool server refused {self.retries + 1} times: {refusal}")


class LocalToolSession:
    """One session of the in-process server."""

    def __init__(self, client: LocalToolClient, session_id: str) -> None:
        self.client, self.session_id = client, session_id
        self._closed = False

    def __repr__(self) -> str:
        return f"LocalToolSession({self.session_id!r})"

    async def call(self, call: ToolCall) -> ToolResult:
        """Run one call: tool failures come back as results, infrastructure failures raise ToolServerError."""
        call_id = call.id or uuid.uuid4().hex  # fixed before the first attempt: a retry joins the same call
        try:
            check_encodable(call.arguments)
        except JSONValueError as e:
            return ToolResult.error(call.id, "bad_arguments", f"arguments of {call.name} are not valid JSON: {e}")
        server = self.client.server
        return await self.client._ask(
            lambda: server.call(server.get(self.session_id), call.name, call.arguments, call_id)
        )

    async def fork(self) -> LocalToolSession:
        """A new session whose tool state equals this one's now."""
        server = self.client.server
        forked = await self.client._ask(lambda: server.fork_session(server.get(self.session_id)))
        return LocalToolSession(self.client, forked.id)

    async def close(self, *, retries: int | None = None) -> None:
        """End the session; idempotent, and a session the server already dropped (expired) counts as closed."""
        if self._closed:
            return
        self._closed = True
        if self.session_id in self.client.server.sessions:
            await self.client.server.close_session(self.session_id)


async def _ready(value: T) -> T:
    return value
