"""`MCPConnection`: one MCP client session, over stdio or streamable HTTP, held open by a task of its own.

The MCP SDK's transports and its `ClientSession` are anyio context managers, which the task that entered them
must also leave; a tool-server session opens in one request and closes in another. So each connection runs in a
task of its own, which enters the transport and the session, completes the handshake and waits for `close()`;
requests from any task of the same event loop go through the session meanwhile.

    stdio  `python server.py`: a fresh server process per connection, in a process group of its own, stopped on
           close as the SDK stops it (stdin closed, then SIGTERM to the group, then SIGKILL)
    HTTP   `http://host:port/mcp`: a fresh MCP session on a running server, terminated on close

A server that cannot be started, or that goes away, raises `InfraError`: the session's state went with it. An
error the server answers a request with raises `ToolError`, typed `bad_arguments` for invalid parameters and
`failed` otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shlex
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import mcp.types
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from agentrl.errors import ConfigError, InfraError, ToolError

logger = logging.getLogger(__name__)

CLOSE_TIMEOUT_S = 15.0
"""How long `close()` waits for the connection to wind down. The SDK bounds its own stdio shutdown (about 6 s
for a server that ignores both the closed stdin and SIGTERM), so this is only reached by a transport stuck
elsewhere."""


@dataclass(frozen=True)
class MCPEndpoint:
    """Where an MCP server is: a command to spawn (stdio), or the URL of a streamable-HTTP endpoint."""

    spec: str
    """The command line or URL as given."""
    command: tuple[str, ...] = ()
    url: str | None = None
    env: Mapping[str, str] | None = None
    """Variables for a spawned server, on top of the SDK's minimal environment (HOME, PATH, SHELL, TERM, USER,
    LOGNAME): a server does not see the tool server's other variables, its secrets included."""

    @classmethod
    def parse(cls, spec: str, env: Mapping[str, str] | None = None) -> MCPEndpoint:
        """`http(s)://…` is a streamable-HTTP endpoint; anything else a command line, split as a shell would."""
        text = spec.strip()
        if text.startswith(("http://", "https://")):
            if env:
                raise ConfigError(f"env is for MCP servers the tool server spawns, not for the endpoint {text}")
            return cls(spec=text, url=text)
        try:
            command = tuple(shlex.split(text))
        except ValueError as exc:
            raise ConfigError(f"cannot split the MCP server command {spec!r}: {exc}") from None
        if not command:
            raise ConfigError("an MCP server needs a command (`python server.py`) or a URL (`http://host:port/mcp`)")
        return cls(spec=text, command=command, env=dict(env) if env else None)


class MCPConnection:
    """One MCP client session: `open()`, then `list_tools()` / `call_tool()` from any task, then `close()`."""

    def __init__(self, endpoint: MCPEndpoint, *, open_timeout_s: float = 30.0) -> None:
        self.endpoint = endpoint
        self.open_timeout_s = open_timeout_s
        self._session: ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._opened: asyncio.Future[None] | None = None
        self._closing = asyncio.Event()
        self._handshake: anyio.CancelScope | None = None

    async def open(self) -> None:
        """Start the server (stdio) or a session on it (HTTP) and complete the handshake; `InfraError` if not."""
        self._opened = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._hold(), name=f"mcp {self.endpoint.spec}")
        try:
            await asyncio.shield(self._opened)
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        """End the session and, for stdio, the server process with it. Idempotent."""
        task, self._task, self._session = self._task, None, None
        if task is None:
            return
        self._closing.set()
        if self._handshake is not None:  # closed while starting (the opening request went away, say)
            self._handshake.cancel()
        try:
            await asyncio.wait_for(asyncio.shield(task), CLOSE_TIMEOUT_S)
        except TimeoutError:
            logger.warning("MCP server %s did not shut down within %gs", self.endpoint.spec, CLOSE_TIMEOUT_S)
            task.cancel()

    @property
    def alive(self) -> bool:
        """Whether the session is open and its task still holds it."""
        return self._session is not None and self._task is not None and not self._task.done()

    async def list_tools(self) -> list[dict[str, Any]]:
        """Every tool the server lists (all pages), in MCP's wire format (`name`, `description`, `inputSchema`)."""
        session = self._live_session()
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            params = mcp.types.PaginatedRequestParams(cursor=cursor) if cursor else None
            try:
                page = await session.list_tools(params=params)
            except MCPError as exc:
                raise InfraError(f"MCP server {self.endpoint.spec} could not list its tools: {exc}") from exc
            tools += page.model_dump(mode="json", by_alias=True, exclude_none=True).get("tools", [])
            cursor = page.next_cursor
            if not cursor:
                return tools

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The server's `CallToolResult` in MCP's wire format (`content`, `structuredContent`, `isError`)."""
        session = self._live_session()
        try:
            result = await session.call_tool(name, arguments)
        except MCPError as exc:
            if exc.code == mcp.types.CONNECTION_CLOSED:
                raise InfraError(self._gone(str(exc))) from exc
            error_type = "bad_arguments" if exc.code == mcp.types.INVALID_PARAMS else "failed"
            raise ToolError(f"{name}: {exc.message}", error_type=error_type) from exc
        except (anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            raise InfraError(self._gone(type(exc).__name__)) from exc
        return result.model_dump(mode="json", by_alias=True, exclude_none=True)

    def _live_session(self) -> ClientSession:
        if self._session is None or self._task is None or self._task.done():
            raise InfraError(self._gone("not connected"))
        return self._session

    def _gone(self, why: str) -> str:
        return f"MCP server {self.endpoint.spec} is gone ({why}): it exited, crashed or dropped the session"

    async def _hold(self) -> None:
        """The connection's own task: enter the transport and the session, and leave them on `close()`."""
        assert self._opened is not None
        try:
            async with self._transport() as (read, write), ClientSession(read, write) as session:
                with anyio.fail_after(self.open_timeout_s) as self._handshake:
                    await session.initialize()
                self._handshake = None
                if not self._closing.is_set():
                    self._session = session
                    self._opened.set_result(None)
                    await self._closing.wait()
        except Exception as exc:  # noqa: BLE001 - reported to `open()`, or logged once the session was up
            if not self._opened.done():
                self._opened.set_exception(InfraError(self._start_failure(exc)))
            else:
                logger.warning("MCP connection to %s ended: %s", self.endpoint.spec, _first_cause(exc))
        finally:
            self._session = None
            if not self._opened.done():  # closed while starting: `open()` was cancelled, or gave up
                self._opened.cancel()

    def _transport(self) -> contextlib.AbstractAsyncContextManager[Any]:
        if self.endpoint.url is not None:
            return streamable_http_client(self.endpoint.url)
        command, *args = self.endpoint.command
        env = dict(self.endpoint.env) if self.endpoint.env else None
        parameters = StdioServerParameters(command=command, args=args, env=env)
        return stdio_client(parameters, errlog=_server_stderr())

    def _start_failure(self, exc: BaseException) -> str:
        cause = _first_cause(exc)
        if isinstance(cause, TimeoutError):
            why = f"no answer to the MCP handshake within {self.open_timeout_s:g}s"
        elif isinstance(cause, MCPError) and cause.code == mcp.types.CONNECTION_CLOSED:
            why = "it closed the connection before the handshake (see its stderr)"
        else:
            why = f"{type(cause).__name__}: {cause}"
        return f"MCP server {self.endpoint.spec} did not start: {why}"


def _first_cause(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (anyio task groups wrap what their tasks raise)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _server_stderr() -> Any:
    """Where a spawned server's stderr goes: the tool server's own stderr when it is a file, else nowhere."""
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return subprocess.DEVNULL
    return sys.stderr
