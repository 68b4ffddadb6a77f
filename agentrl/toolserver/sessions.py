"""`ToolSessions`: the state behind one tool server — toolsets, open sessions, their sandboxes and calls.

A session owns one instance of each toolset class it uses, opened with the session (an MCP toolset starts its
server there), and one `SessionSandbox` shared by its sandboxed toolsets (code, terminal, files see the same
workspace), started on first use. Calls of one session may run
concurrently unless the toolset class sets `serial = True`. A repeated `call_id` returns the first call's
result, even while that call still runs, so a client may retry a call whose response it lost.

Load: each toolset runs at most `max_concurrent_calls` calls at once; more wait in a bounded queue (the wait
is the `agentrl_tool_queue_seconds` metric); a full queue refuses the call with `Overloaded` before it is
registered, so the client's retry (same `call_id`) runs it once. Sessions idle for `session_ttl_s` are closed
with their sandboxes; closing the server closes everything, and a server killed outright leaves no process
behind (sandboxes die with their parent) and its directories are removed by the next server that starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentrl.errors import InputError, SandboxError
from agentrl.sandbox.provider import SandboxProvider
from agentrl.sandbox.session_sandbox import SessionSandbox
from agentrl.tool import FunctionTool
from agentrl.toolserver.admission import Admission, Overloaded
from agentrl.toolserver.config import ToolServerConfig
from agentrl.toolserver.metrics import ToolServerMetrics
from agentrl.toolserver.toolsets import Toolset, close_instance, fork_instance, open_instance, resolve_toolsets
from agentrl.types import ToolResult

logger = logging.getLogger(__name__)

_UNKNOWN_TOOL_LABEL = "_unknown"


class SessionError(InputError):
    """A request the server cannot serve; `status` is the HTTP status the app answers with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class ServerSession:
    """One session's toolset instances, sandbox, enabled tools and calls (finished or running), by call id."""

    id: str
    names: tuple[str, ...]
    instances: dict[int, Any]
    """Toolset index → the instance holding this session's state (None for stateless toolsets)."""
    tools: dict[str, tuple[FunctionTool, Toolset]]
    sandbox: SessionSandbox | None = None
    calls: dict[str, asyncio.Future[ToolResult]] = field(default_factory=dict)
    serial_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    last_used: float = field(default_factory=time.monotonic)

    @property
    def busy(self) -> bool:
        return any(not call.done() for call in self.calls.values())


class ToolSessions:
    """Sessions, calls, forks and expiry of one tool server (the HTTP layer is `agentrl.toolserver.app`)."""

    def __init__(self, toolsets: Sequence[object | str], config: ToolServerConfig | None = None) -> None:
        self.config = config or ToolServerConfig()
        self.toolsets = resolve_toolsets(toolsets)
        self.tools: dict[str, tuple[int, Toolset]] = {
            name: (index, toolset) for index, toolset in enumerate(self.toolsets) for name in toolset.tools
        }
        self.sessions: dict[str, ServerSession] = {}
        self.metrics = ToolServerMetrics()
        self.sandboxes = SandboxProvider(self.config.sandbox)
        caps = {ts.label: ts.max_concurrency for ts in self.toolsets if ts.max_concurrency}
        self.admission = Admission(self.config.max_concurrent_calls, self.config.max_queued_calls, caps=caps)
        self._setup_done = False
        self._setup_lock: asyncio.Lock | None = None
        self._reaper: asyncio.Task[None] | None = None

    def schemas(self, names: Sequence[str] | None = None) -> list[dict[str, Any]]:
        self._check_names(names or ())
        wanted = set(names) if names else None
        return [t.schema for ts in self.toolsets for t in ts.tools.values() if wanted is None or t.name in wanted]

    async def ensure_setup(self) -> None:
        """Run every toolset's class-level `setup` once, and start expiring idle sessions."""
        if self._setup_done:
            return
        if self._setup_lock is None:
            self._setup_lock = asyncio.Lock()
        async with self._setup_lock:
            if self._setup_done:
                return
            for toolset in self.toolsets:
                await toolset.setup()
            if self.config.session_ttl_s > 0:
                self._reaper = asyncio.create_task(self._expire_idle_sessions())
            self._setup_done = True

    async def open_session(self, names: Sequence[str] | None, *, network: bool = False) -> ServerSession:
        names = tuple(self.tools) if names is None else tuple(names)
        self._check_names(names)
        if len(self.sessions) >= self.config.max_sessions:
            raise SessionError(503, f"session limit reached ({self.config.max_sessions} open sessions)")
        if network and not self.config.sandbox.allow_network:
            raise SessionError(403, "this tool server does not allow network access in sandboxes")
        try:
            await self.ensure_setup()
        except Exception as exc:
            raise SessionError(500, f"toolset setup failed: {type(exc).__name__}: {exc}") from exc
        used = sorted({self.tools[name][0] for name in names})
        sandboxed = any(self.toolsets[i].uses_sandbox for i in used)
        if sandboxed:
            try:
                self.sandboxes.check()
            except SandboxError as exc:
                raise SessionError(500, f"cannot start a sandbox: {exc}") from exc
        sandbox = SessionSandbox(self.sandboxes, network=network) if sandboxed else None
        instances: dict[int, Any] = {}
        try:
            for index in used:
                instances[index] = self.toolsets[index].instantiate(sandbox)
                await open_instance(instances[index])
        except asyncio.CancelledError:
            await self._close(instances, sandbox)  # an opened instance may hold a process (an MCP server)
            raise
        except Exception as exc:
            await self._close(instances, sandbox)
            label = self.toolsets[index].label
            raise SessionError(500, f"cannot create toolset {label}: {type(exc).__name__}: {exc}") from exc
        return self._register(names, instances, sandbox)

    async def fork_session(self, session: ServerSession) -> ServerSession:
        """A new session whose state equals `session`'s once its in-flight calls have finished."""
        start = time.perf_counter()
        pending = [call for call in session.calls.values() if not call.done()]
        if pending:
            await asyncio.wait(pending)
        session.last_used = time.monotonic()
        sandbox = await session.sandbox.fork() if session.sandbox is not None else None
        instances: dict[int, Any] = {}
        for index, instance in session.instances.items():
            toolset = self.toolsets[index]
            try:
                # A sandboxed toolset keeps its state in the sandbox, which was just copied.
                instances[index] = (
                    toolset.instantiate(sandbox) if toolset.uses_sandbox else await fork_instance(instance)
                )
            except Exception as exc:
                await self._close(instances, sandbox)
                hint = "" if hasattr(instance, "fork") else "; give it a fork() method"
                message = f"cannot fork toolset {toolset.label}: {type(exc).__name__}: {exc}{hint}"
                raise SessionError(409, message) from exc
        forked = self._register(session.names, instances, sandbox)
        self.metrics.forks.observe(time.perf_counter() - start)
        return forked

    async def close_session(self, session_id: str) -> None:
        session = self.get(session_id)
        del self.sessions[session_id]
        self.metrics.sessions.set(len(self.sessions))
        for call in session.calls.values():
            call.cancel()
        await self._close(session.instances, session.sandbox)

    async def close_all(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
            self._reaper = None
        for session_id in list(self.sessions):
            await self.close_session(session_id)
        await self.sandboxes.close()
        if self._setup_done:
            for toolset in self.toolsets:
                await toolset.teardown()
        self._setup_done = False

    def get(self, session_id: str) -> ServerSession:
        session = self.sessions.get(session_id)
        if session is None:
            raise SessionError(404, f"unknown session {session_id!r} (closed, expired, or never opened on this server)")
        return session

    async def call(self, session: ServerSession, name: str, arguments: Any, call_id: str | None) -> ToolResult:
        call_id = call_id or uuid.uuid4().hex
        session.last_used = time.monotonic()
        future = session.calls.get(call_id)
        if future is None:
            entry = session.tools.get(name)
            try:
                ticket = self.admission.admit(entry[1].label) if entry is not None else None
            except Overloaded as exc:
                self.metrics.refused.labels(entry[1].label).inc()
                raise SessionError(503, f"tool server overloaded: {exc}") from exc
            future = asyncio.ensure_future(self._run(session, name, arguments, call_id, ticket))
            if ticket is not None:
                # A call cancelled before it started (its session closed) must still leave the queue.
                future.add_done_callback(lambda _: ticket.cancel())
            session.calls[call_id] = future
        try:
            # Shielded: a request that goes away (a client timeout, say) must not cancel a call that its
            # retry will come back for.
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            if future.cancelled() and not asyncio.current_task().cancelling():
                return ToolResult.error(call_id, "failed", f"session {session.id} was closed while {name} ran")
            raise
        finally:
            session.last_used = time.monotonic()

    async def _run(self, session: ServerSession, name: str, arguments: Any, call_id: str, ticket: Any) -> ToolResult:
        entry = session.tools.get(name)
        if entry is None:
            result = ToolResult.error(call_id, "not_found", self._not_found_message(session, name))
            self.metrics.observe(_UNKNOWN_TOOL_LABEL if name not in self.tools else name, result)
            return result
        tool, toolset = entry
        async with ticket:
            self.metrics.queue.labels(toolset.label).observe(ticket.waited_s)
            if toolset.serial:
                async with session.serial_lock:
                    result = await self._invoke(tool, arguments, call_id)
            else:
                result = await self._invoke(tool, arguments, call_id)
        self.metrics.observe(name, result)
        return result

    async def _invoke(self, tool: FunctionTool, arguments: Any, call_id: str) -> ToolResult:
        if tool.timeout_s is not None:
            return await tool.call(arguments, call_id=call_id)
        start = time.perf_counter()
        try:
            async with asyncio.timeout(self.config.tool_timeout_s):
                return await tool.call(arguments, call_id=call_id)
        except TimeoutError:
            message = f"{tool.name} timed out after {self.config.tool_timeout_s:g}s"
            return ToolResult.error(call_id, "timeout", message, time.perf_counter() - start)

    def _not_found_message(self, session: ServerSession, name: str) -> str:
        available = ", ".join(session.names) or "none"
        if name in self.tools:
            return f"tool {name!r} is not enabled in this session; available tools: {available}"
        return f"unknown tool {name!r}; available tools: {available}"

    def _register(
        self, names: tuple[str, ...], instances: dict[int, Any], sandbox: SessionSandbox | None
    ) -> ServerSession:
        tools: dict[str, tuple[FunctionTool, Toolset]] = {}
        for index, instance in instances.items():
            toolset = self.toolsets[index]
            for name, bound in toolset.bind(instance).items():
                if name in names:
                    tools[name] = (bound, toolset)
        session = ServerSession(id=uuid.uuid4().hex, names=names, instances=instances, tools=tools, sandbox=sandbox)
        self.sessions[session.id] = session
        self.metrics.sessions.set(len(self.sessions))
        return session

    def _check_names(self, names: Sequence[str]) -> None:
        unknown = [name for name in names if name not in self.tools]
        if unknown:
            raise SessionError(400, f"unknown tools: {', '.join(unknown)}; this server has: {', '.join(self.tools)}")

    async def _close(self, instances: dict[int, Any], sandbox: SessionSandbox | None) -> None:
        for index, instance in instances.items():
            try:
                await close_instance(instance)
            except Exception:
                logger.exception("closing toolset %s failed", self.toolsets[index].label)
        if sandbox is not None:
            try:
                await sandbox.close()
            except Exception:
                logger.exception("closing a sandbox failed")

    async def _expire_idle_sessions(self) -> None:
        ttl = self.config.session_ttl_s
        while True:
            await asyncio.sleep(min(60.0, max(0.05, ttl / 4)))
            cutoff = time.monotonic() - ttl
            for session in list(self.sessions.values()):
                if session.last_used < cutoff and not session.busy and session.id in self.sessions:
                    logger.info("closing session %s: idle for more than %gs", session.id, ttl)
                    self.metrics.sessions_expired.inc()
                    await self.close_session(session.id)
