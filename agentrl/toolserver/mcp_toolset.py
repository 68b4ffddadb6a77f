"""MCP servers as toolsets: `mcp_toolset("python server.py")` is a toolset class whose tools are the server's.

    from agentrl.toolserver.mcp_toolset import mcp_toolset

    files = mcp_toolset("npx -y @modelcontextprotocol/server-filesystem /data", prefix="fs_")
    ReactScaffold(tools=[files, calculate], ...)             # in-process, as any toolset class
    agentrl serve-tools --mcp "python server.py" --mcp http://127.0.0.1:9000/mcp

Making the class lists the server's tools once (for a command, by starting it for the listing and stopping
it), so their schemas exist before any session and name clashes fail at startup. The class then behaves as any
toolset class behind the tool server: one instance per session. How instances reach the server is `sessions`:

- `per_session`: each instance opens its own MCP session when the tool-server session opens (`open()`) and
  closes it when that session closes (`close()`). For a command that means a fresh server process per session
  (about a second to start), so per-trajectory state is isolated as a sandbox's is, and no process outlives its
  session; for a URL, a fresh MCP session on the one server. Such sessions cannot be forked: a server's state
  cannot be copied.
- `shared`: every instance of one event loop calls through one MCP session (one server process for a command),
  opened by the first session and kept until the tool server stops (`teardown()`); concurrent calls share it.
  For tools without state of their own; sessions fork freely (the fork shares the connection).
- `auto` (the default): `shared` when the server annotates every tool read-only (`readOnlyHint`: it changes
  nothing, so no session can see another's doing), `per_session` otherwise.

A server that cannot start fails the session's opening; one that dies fails the calls that reach it, as
infrastructure errors (a shared one is started afresh by the next session that opens).

A spec string `mcp:COMMAND` or `mcp:URL` names the same thing wherever toolsets are named by string.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
from collections.abc import Mapping
from typing import Any, ClassVar

from agentrl.errors import ConfigError, InfraError
from agentrl.toolserver.mcp_connection import MCPConnection, MCPEndpoint
from agentrl.toolserver.mcp_tool import MCPTool

SPEC_PREFIX = "mcp:"
"""How a toolset spec string names an MCP server: `mcp:python server.py`, `mcp:http://host:port/mcp`."""
SESSIONS = ("auto", "shared", "per_session")


class MCPToolset:
    """The per-session state of an MCP toolset: its MCP connection, its own or the shared one. Subclasses come
    from `mcp_toolset`."""

    endpoint: ClassVar[MCPEndpoint]
    open_timeout_s: ClassVar[float] = 30.0
    shared: ClassVar[bool] = False
    """One connection for every session of an event loop (`sessions="shared"`), else one per session."""
    _pool: ClassVar[dict[asyncio.AbstractEventLoop, tuple[asyncio.Lock, list[MCPConnection]]]]

    def __init__(self) -> None:
        self._connection = None if self.shared else MCPConnection(self.endpoint, open_timeout_s=self.open_timeout_s)

    async def open(self) -> None:
        """Start this session's server process (or MCP session), or join the shared one; `InfraError` if it does
        not come up."""
        if not self.shared:
            assert self._connection is not None
            await self._connection.open()
            return
        lock, held = self._pool.setdefault(asyncio.get_running_loop(), (asyncio.Lock(), []))
        async with lock:  # the first session starts the shared server, the others wait for it
            if not held or not held[0].alive:
                if held:
                    await held.pop().close()
                connection = MCPConnection(self.endpoint, open_timeout_s=self.open_timeout_s)
                await connection.open()
                held.append(connection)
        self._connection = held[0]

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """One `tools/call` on this session's server; the result in MCP's wire format."""
        if self._connection is None:
            raise InfraError(f"MCP server {self.endpoint.spec}: the session was not opened")
        return await self._connection.call_tool(name, arguments)

    def fork(self) -> MCPToolset:
        if self.shared:  # nothing of the session's own to copy: the fork calls the same server
            return copy.copy(self)
        raise ConfigError(
            f"the state of MCP server {self.endpoint.spec} cannot be copied, so sessions with its tools cannot be "
            "forked; branching rollouts need tools whose state can be (or a server whose tools are read-only, "
            "shared by every session: mcp_toolset(..., sessions='shared'))"
        )

    async def close(self) -> None:
        """End this session's MCP session, and its server process for a command (a shared one stays up)."""
        if not self.shared and self._connection is not None:
            await self._connection.close()

    @classmethod
    async def teardown(cls) -> None:
        """Stop the shared server of this event loop (the tool server is stopping)."""
        if not cls.shared:
            return
        _, held = cls._pool.pop(asyncio.get_running_loop(), (None, []))
        for connection in held:
            await connection.close()


def mcp_toolset(
    server: str,
    *,
    prefix: str = "",
    env: Mapping[str, str] | None = None,
    timeout_s: float | None = None,
    open_timeout_s: float = 30.0,
    sessions: str = "auto",
) -> type[MCPToolset]:
    """A toolset class serving the tools of the MCP server `server`: a command line (stdio) or a streamable-HTTP
    URL (`http://host:port/mcp`).

    `prefix` is put before every tool name (`fs_` → `fs_read_file`), to keep two servers' names apart. `env`
    adds variables to a spawned server's minimal environment. `timeout_s` bounds each call (None: the tool
    server's `tool_timeout_s`); `open_timeout_s` bounds the MCP handshake. `sessions` is `per_session` (a server
    process, or MCP session, per tool-server session), `shared` (one for all) or `auto` (shared when every tool is
    annotated read-only). Lists the tools now; raises `InfraError` when the server does not start and
    `ConfigError` when it lists no tools or clashing names.
    """
    if sessions not in SESSIONS:
        raise ConfigError(f"MCP sessions must be one of {', '.join(SESSIONS)}, not {sessions!r}")
    endpoint = MCPEndpoint.parse(server, env=env)
    listing = _run_in_own_loop(_list_tools(endpoint, open_timeout_s))
    tools = [MCPTool(entry, server=endpoint.spec, prefix=prefix, timeout_s=timeout_s) for entry in listing]
    if not tools:
        raise ConfigError(f"MCP server {endpoint.spec} lists no tools")
    read_only = all((entry.get("annotations") or {}).get("readOnlyHint") is True for entry in listing)
    attributes: dict[str, Any] = {
        "endpoint": endpoint,
        "open_timeout_s": open_timeout_s,
        "shared": sessions == "shared" or (sessions == "auto" and read_only),
        "_pool": {},
    }
    for tool in tools:
        key = f"mcp__{tool.name}"  # apart from the class's own methods: a tool may be called `close`
        if key in attributes:
            raise ConfigError(f"MCP server {endpoint.spec} lists two tools named {tool.name!r} (after renaming)")
        attributes[key] = tool
    cls = type(f"MCPToolset<{endpoint.spec}>", (MCPToolset,), attributes)
    cls.__module__ = __name__
    how = "one server for every session" if attributes["shared"] else "a server per session"
    cls.__doc__ = f"The tools of MCP server {endpoint.spec} ({how})."
    return cls


def toolset_from_spec(spec: str) -> type[MCPToolset]:
    """The toolset class of an `mcp:COMMAND` / `mcp:URL` spec string."""
    return mcp_toolset(spec.removeprefix(SPEC_PREFIX))


async def _list_tools(endpoint: MCPEndpoint, open_timeout_s: float) -> list[dict[str, Any]]:
    connection = MCPConnection(endpoint, open_timeout_s=open_timeout_s)
    await connection.open()
    try:
        return await connection.list_tools()
    finally:
        await connection.close()


def _run_in_own_loop(coroutine: Any) -> Any:
    # A thread of its own: the caller may be inside a running event loop (a scaffold built in async code).
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="mcp-list") as pool:
        return pool.submit(asyncio.run, coroutine).result()
