"""`ToolClient`: the async HTTP client of the tool server, implementing `ToolBackend` and `ToolSession`.

    async with ToolClient("http://127.0.0.1:8000", token=token) as tools:
        session = await tools.open_session(["echo"])
        result = await session.call(ToolCall(id="c1", name="echo", arguments={"text": "hi"}))
        await session.close()

`ToolClient(app=create_app([...]))` talks to an app in the same process through `httpx.ASGITransport`: the
same code path, without sockets.

Routing: with several base URLs (tool-server processes, e.g. `agentrl serve-tools --replicas N`), each new
session goes to the server holding the fewest of this client's open sessions (ties taken in turn), and every
request of a session goes to the server that created it: session state lives in that server's process.

Failures: a tool that fails returns a `ToolResult` with `is_error=True`; nothing is raised for it. Transport
errors (connect, read, timeout, dropped connection) and HTTP 502/503/504 are retried with exponential backoff
and jitter; a retried call keeps its `call_id`, so the server runs it once and returns the stored result.
Requests the server does not deduplicate (opening and forking a session) are retried only when they cannot
have reached it (connection refused or timed out) or it refused them (503). A server whose last attempt could
not even connect is marked down for `down_for_s`: meanwhile its sessions' requests fail at once instead of each
waiting through the retries again, and new sessions go to the other servers (a down server is tried last, once).
What cannot be served raises a `ToolServerError` (an `agentrl.errors.InfraError`), which ends the episode as an
infrastructure failure (`StopReason.INFRA_ERROR`), not as a mistake of the policy:

    ToolServerError            the server refused the request (unknown tool names, bad token, ...)
     ├── ToolServerUnavailable the server stayed unreachable through all retries (or is marked down)
     └── SessionNotFound       the server does not know the session (closed, or the server restarted)

Set `timeout_s` above the longest tool timeout: a read timeout is retried, and the retry waits for the same
call.

Connections: each server gets `connection_pools` independent connection pools and each session sticks to one of
them. httpcore's pool does work proportional to (requests waiting) × (connections) on every state change, so one
pool shared by a few dozen concurrent sessions spends most of the client's CPU choosing connections; sharding
keeps each pool small (about 3.7× the calls/s at 32 concurrent sessions on 2 cores, see `agentrl bench tools`).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
import ssl
import time
import uuid
from collections.abc import Sequence
from typing import Any, Self

import httpx

from agentrl.errors import SessionNotFound, ToolServerError, ToolServerUnavailable
from agentrl.json_values import JSONValueError, check_encodable
from agentrl.types import ToolCall, ToolResult

__all__ = ["SessionNotFound", "ToolClient", "ToolServerError", "ToolServerUnavailable"]

logger = logging.getLogger(__name__)

_RETRY_STATUS = frozenset({502, 503, 504})
# Failures after which a request that is not idempotent certainly did not run on the server.
_UNSENT_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
# Failures that say the server process is not there (as opposed to slow, or one connection dropped).
_DOWN_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout)
_REFUSED_STATUS = 503
_IN_PROCESS_URL = "http://agentrl-tools.local"


class ToolClient:
    """A `ToolBackend` over one or several tool servers, or over an in-process app."""

    def __init__(
        self,
        base_urls: str | Sequence[str] | None = None,
        *,
        app: Any = None,
        token: str | None = None,
        timeout_s: float = 60.0,
        connect_timeout_s: float = 5.0,
        retries: int = 3,
        backoff_s: float = 0.25,
        down_for_s: float = 5.0,
        connection_pools: int = 16,
    ) -> None:
        if (base_urls is None) == (app is None):
            raise ValueError("ToolClient needs exactly one of base_urls and app")
        if connection_pools < 1:
            raise ValueError("connection_pools must be at least 1")
        self._transport = httpx.ASGITransport(app=app) if app is not None else None
        self._app = app
        urls = [_IN_PROCESS_URL] if app is not None else [base_urls] if isinstance(base_urls, str) else list(base_urls)
        if not urls:
            raise ValueError("ToolClient needs at least one base URL")
        self._urls = [url.rstrip("/") for url in urls]
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        # A short connect timeout: a host that drops packets must not hold a call for timeout_s per attempt.
        self._timeout = httpx.Timeout(timeout_s, connect=min(connect_timeout_s, timeout_s))
        self._ssl: ssl.SSLContext | None = None
        pools = 1 if app is not None else connection_pools
        self._pools: list[list[httpx.AsyncClient | None]] = [[None] * pools for _ in urls]
        self._next_pool = itertools.count()
        self.retries = retries
        self.backoff_s = backoff_s
        self.down_for_s = down_for_s
        self._down_until = [0.0] * len(urls)
        """Per server: the monotonic time until which it counts as down (0: up)."""
        self._open_per_server = [0] * len(urls)
        self._turn = 0
        self._sessions: set[HTTPToolSession] = set()

    @property
    def base_urls(self) -> list[str]:
        return list(self._urls)

    async def schemas(self, names: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """OpenAI function-tool schemas of the served tools (all of them, or those named)."""
        params = {"names": ",".join(names)} if names else None
        return await self._first_available(lambda i: self._request(i, "GET", "/tools", params=params))

    async def health(self) -> list[dict[str, Any]]:
        """Each server's `/health` answer, in the order of `base_urls`."""
        return [await self._request(i, "GET", "/health") for i in range(len(self._urls))]

    def is_down(self, server: int) -> bool:
        """Whether a request to `server` (an index into `base_urls`) ended unable to connect within `down_for_s`."""
        return time.monotonic() < self._down_until[server]

    async def open_session(self, tools: Sequence[str] | None = None, *, network: bool = False) -> HTTPToolSession:
        """A new session on the least-loaded server that is up; falls over to the next if one is unreachable.

        `network=True` asks for a sandbox with network access (refused unless the server allows it).
        """
        count = len(self._urls)
        order = sorted(
            range(count),
            key=lambda i: (self.is_down(i), self._open_per_server[i], (i - self._turn) % count),
        )
        self._turn = (self._turn + 1) % count
        body: dict[str, Any] = {"tools": list(tools)} if tools is not None else {}
        if network:
            body["network"] = True
        failure: ToolServerUnavailable | None = None
        for server in order:
            down = self.is_down(server)
            self._open_per_server[server] += 1  # reserved now so that concurrent opens spread out
            try:
                data = await self._request(
                    server, "POST", "/sessions", json=body, idempotent=False, probe=down, retries=0 if down else None
                )
            except ToolServerUnavailable as exc:
                self._open_per_server[server] -= 1
                failure = exc
                continue
            except BaseException:
                self._open_per_server[server] -= 1
                raise
            return self._adopt(server, data["session_id"])
        assert failure is not None
        raise failure

    async def aclose(self) -> None:
        """Close the sessions this client still has open (one attempt each), then its connections; for an
        in-process app, also what its server's shutdown would release (sandboxes, toolset teardown such as the
        GUI toolset's browser), since `httpx.ASGITransport` sends no lifespan events."""
        await asyncio.gather(*(s.close(retries=0) for s in list(self._sessions)), return_exceptions=True)
        for pools in self._pools:
            for pool in pools:
                if pool is not None:
                    await pool.aclose()
        server = getattr(getattr(self._app, "state", None), "tool_server", None)
        if server is not None:
            await server.close_all()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _adopt(self, server: int, session_id: str) -> HTTPToolSession:
        session = HTTPToolSession(self, server, session_id, pool=next(self._next_pool) % len(self._pools[server]))
        self._sessions.add(session)
        return session

    def _forget(self, session: HTTPToolSession) -> None:
        if session in self._sessions:
            self._sessions.discard(session)
            self._open_per_server[session.server] -= 1

    async def _first_available(self, request: Any) -> Any:
        failure: ToolServerUnavailable | None = None
        for server in sorted(range(len(self._urls)), key=self.is_down):
            try:
                return await request(server)
            except ToolServerUnavailable as exc:
                failure = exc
        assert failure is not None
        raise failure

    async def _request(
        self,
        server: int,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, str] | None = None,
        retries: int | None = None,
        idempotent: bool = True,
        probe: bool = False,
        pool: int = 0,
    ) -> Any:
        """One request with retries on transport errors and 502/503/504; other HTTP errors raise at once.

        `idempotent=False` narrows the retries to failures after which the request certainly did not run.
        A server marked down fails the request at once, unless `probe` asks to try it anyway.
        """
        client = self._client(server, pool)
        retries = self.retries if retries is None else retries
        if not probe and self.is_down(server):
            raise self._down_error(server)
        failure = ""
        unreachable = False
        for attempt in range(retries + 1):
            if attempt:
                await asyncio.sleep(self.backoff_s * 2 ** (attempt - 1) * random.uniform(0.5, 1.5))
                if not probe and self.is_down(server):  # another request exhausted its retries meanwhile
                    raise self._down_error(server)
            try:
                response = await client.request(method, path, json=json, params=params)
            except httpx.TransportError as exc:
                failure, unreachable = f"{type(exc).__name__}: {exc}", isinstance(exc, _DOWN_ERRORS)
                if idempotent or isinstance(exc, _UNSENT_ERRORS):
                    continue
                break
            unreachable = False
            if response.status_code in _RETRY_STATUS:
                failure = f"HTTP {response.status_code}: {_detail(response)}"
                if idempotent or response.status_code == _REFUSED_STATUS:
                    continue
                break
            self._down_until[server] = 0.0
            return _decode(response, method, path)
        if unreachable:
            self._down_until[server] = time.monotonic() + self.down_for_s
        raise ToolServerUnavailable(
            f"tool server {client.base_url} unreachable after {attempt + 1} attempt{'s' if attempt else ''} ({failure})"
        )

    def _client(self, server: int, pool: int) -> httpx.AsyncClient:
        client = self._pools[server][pool]
        if client is None:
            if self._ssl is None:
                self._ssl = httpx.create_ssl_context()  # built once: it costs ~30 ms per client otherwise
            client = httpx.AsyncClient(
                base_url=self._urls[server],
                transport=self._transport,
                headers=self._headers,
                timeout=self._timeout,
                limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
                verify=self._ssl,
            )
            self._pools[server][pool] = client
        return client

    def _down_error(self, server: int) -> ToolServerUnavailable:
        left_s = self._down_until[server] - time.monotonic()
        return ToolServerUnavailable(
            f"tool server {self._urls[server]} is down (could not connect; next try in {left_s:.1f}s)"
        )


class HTTPToolSession:
    """One session on one tool server; every request goes to the server that created it."""

    def __init__(self, client: ToolClient, server: int, session_id: str, *, pool: int = 0) -> None:
        self._client = client
        self.server = server
        self.pool = pool
        self.session_id = session_id
        self._closed = False

    @property
    def base_url(self) -> str:
        return self._client.base_urls[self.server]

    def __repr__(self) -> str:
        return f"HTTPToolSession({self.session_id!r} on {self.base_url})"

    async def call(self, call: ToolCall) -> ToolResult:
        """Run one call: tool failures come back as results, infrastructure failures raise ToolServerError."""
        call_id = call.id or uuid.uuid4().hex  # fixed before the first attempt: retries reuse it
        try:  # arguments that cannot travel as JSON are the caller's mistake, answered as one
            check_encodable(call.arguments)
        except JSONValueError as e:
            return ToolResult.error(call.id, "bad_arguments", f"arguments of {call.name} are not valid JSON: {e}")
        body = {"name": call.name, "arguments": call.arguments, "call_id": call_id}
        data = await self._client._request(
            self.server, "POST", f"/sessions/{self.session_id}/call", json=body, pool=self.pool
        )
        return ToolResult.from_json(data)

    async def fork(self) -> HTTPToolSession:
        """A new session on the same server whose tool state equals this one's now."""
        data = await self._client._request(
            self.server, "POST", f"/sessions/{self.session_id}/fork", idempotent=False, pool=self.pool
        )
        self._client._open_per_server[self.server] += 1
        return self._client._adopt(self.server, data["session_id"])

    async def close(self, *, retries: int | None = None) -> None:
        """End the session on the server. Idempotent; an unreachable server is logged, not raised."""
        if self._closed:
            return
        self._closed = True
        self._client._forget(self)
        try:
            await self._client._request(
                self.server, "DELETE", f"/sessions/{self.session_id}", retries=retries, pool=self.pool
            )
        except SessionNotFound:
            pass
        except ToolServerUnavailable as exc:
            # A server marked down has already failed this session's caller; one line per session would only
            # repeat that for every rollout it held.
            log = logger.debug if self._client.is_down(self.server) else logger.warning
            log("could not close tool session %s: %s", self.session_id, exc)


def _decode(response: httpx.Response, method: str, path: str) -> Any:
    if response.is_success:
        return response.json()
    detail = _detail(response)
    if response.status_code == 404 and path.startswith("/sessions/"):
        raise SessionNotFound(detail, status_code=404)
    message = f"tool server {response.url.host} answered {method} {path} with HTTP {response.status_code}: {detail}"
    raise ToolServerError(message, status_code=response.status_code)


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text
    detail = body.get("detail", body) if isinstance(body, dict) else body
    return detail if isinstance(detail, str) else str(detail)
