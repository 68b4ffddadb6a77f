"""The tool server: toolsets behind the HTTP API of DESIGN §5, as a FastAPI app.

    GET    /health                  {"status": "ok", "tools": N, "sessions": M}   (open even with a token)
    GET    /metrics                 Prometheus text
    GET    /tools[?names=a,b]       OpenAI function-tool schemas
    POST   /sessions                {"tools": [...]?} → {"session_id"}
    DELETE /sessions/{id}           closes the session's toolset instances
    POST   /sessions/{id}/call      {"name", "arguments", "call_id"?} → a ToolResult as JSON
    POST   /sessions/{id}/fork      → {"session_id"} of a copy of the session's state

A session owns one instance of each toolset class it uses. Calls of one session may run concurrently unless
the toolset class sets `serial = True`. A repeated `call_id` returns the first call's result, even while that
call is still running, so a client may retry a call whose response it lost. Tool failures are results with
`is_error: true` and HTTP 200; only malformed requests, unknown sessions and server limits are HTTP errors.

`create_app` serves under uvicorn (`serve`) or in-process through `httpx.ASGITransport`
(`ToolClient(app=...)`); toolset setup runs at startup or, where no lifespan events come, before the first
session.
"""

import asyncio
import hmac
import logging
import uuid
from collections.abc import Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Header, HTTPException, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from pydantic import BaseModel

from agentrl.tool import FunctionTool
from agentrl.toolsets import Toolset, close_instance, fork_instance, resolve_toolsets
from agentrl.types import ToolResult

logger = logging.getLogger(__name__)

_UNKNOWN_TOOL_LABEL = "_unknown"


class OpenSessionRequest(BaseModel):
    tools: list[str] | None = None
    """Names of the tools the session may call; all tools when absent."""


class CallRequest(BaseModel):
    name: str
    arguments: dict[str, Any] | str | None = None
    """An object, or the JSON string a model produced."""
    call_id: str | None = None
    """Idempotency key: a repeated id returns the stored result without running the tool again."""


@dataclass
class ServerSession:
    """One session's toolset instances, enabled tools and calls (finished or running), by call id."""

    id: str
    names: tuple[str, ...]
    instances: dict[int, Any]
    """Toolset index → the instance holding this session's state (None for stateless toolsets)."""
    tools: dict[str, tuple[FunctionTool, Toolset]]
    calls: dict[str, "asyncio.Future[ToolResult]"] = field(default_factory=dict)
    serial_lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class _Metrics:
    """Prometheus metrics of one app, in a registry of its own so that several apps can share a process."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.calls = Counter("agentrl_tool_calls", "Tool calls run", ["tool"], registry=self.registry)
        self.errors = Counter(
            "agentrl_tool_errors",
            "Tool calls that returned an error",
            ["tool", "error_type"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "agentrl_tool_call_seconds", "Tool call latency", ["tool"], registry=self.registry
        )
        self.sessions = Gauge("agentrl_tool_sessions_active", "Open sessions", registry=self.registry)

    def observe(self, tool: str, result: ToolResult) -> None:
        self.calls.labels(tool).inc()
        self.latency.labels(tool).observe(result.elapsed_s)
        if result.is_error:
            self.errors.labels(tool, result.error_type or "unknown").inc()


class ToolServer:
    """The state behind one app: the toolsets, the open sessions, the metrics."""

    def __init__(self, toolsets: Sequence[object | str], *, max_sessions: int = 4096) -> None:
        self.toolsets = resolve_toolsets(toolsets)
        self.tools: dict[str, tuple[int, Toolset]] = {
            name: (index, toolset) for index, toolset in enumerate(self.toolsets) for name in toolset.tools
        }
        self.max_sessions = max_sessions
        self.sessions: dict[str, ServerSession] = {}
        self.metrics = _Metrics()
        self._setup_done = False
        self._setup_lock: asyncio.Lock | None = None

    def schemas(self, names: Sequence[str] | None = None) -> list[dict[str, Any]]:
        self._check_names(names or ())
        wanted = set(names) if names else None
        return [
            tool.schema
            for ts in self.toolsets
            for tool in ts.tools.values()
            if wanted is None or tool.name in wanted
        ]

    async def ensure_setup(self) -> None:
        """Run every toolset's class-level `setup` once, before the first session."""
        if self._setup_done:
            return
        if self._setup_lock is None:
            self._setup_lock = asyncio.Lock()
        async with self._setup_lock:
            for toolset in self.toolsets:
                await toolset.setup()
            self._setup_done = True

    async def open_session(self, names: Sequence[str] | None) -> ServerSession:
        names = tuple(self.tools) if names is None else tuple(names)
        self._check_names(names)
        if len(self.sessions) >= self.max_sessions:
            raise HTTPException(503, f"session limit reached ({self.max_sessions} open sessions)")
        try:
            await self.ensure_setup()
        except Exception as exc:
            raise HTTPException(500, f"toolset setup failed: {type(exc).__name__}: {exc}") from exc
        used = sorted({self.tools[name][0] for name in names})
        instances: dict[int, Any] = {}
        try:
            for index in used:
                instances[index] = self.toolsets[index].instantiate()
        except Exception as exc:
            await self._close_instances(instances)
            label = self.toolsets[index].label
            raise HTTPException(500, f"cannot create toolset {label}: {type(exc).__name__}: {exc}") from exc
        return self._register(names, instances)

    async def fork_session(self, session: ServerSession) -> ServerSession:
        """A new session whose toolset state equals `session`'s once its in-flight calls have finished."""
        pending = [call for call in session.calls.values() if not call.done()]
        if pending:
            await asyncio.wait(pending)
        instances: dict[int, Any] = {}
        for index, instance in session.instances.items():
            try:
                instances[index] = await fork_instance(instance)
            except Exception as exc:
                await self._close_instances(instances)
                label = self.toolsets[index].label
                message = f"cannot fork toolset {label}: {type(exc).__name__}: {exc}; give it a fork() method"
                raise HTTPException(409, message) from exc
        return self._register(session.names, instances)

    async def close_session(self, session_id: str) -> None:
        session = self.get(session_id)
        del self.sessions[session_id]
        self.metrics.sessions.set(len(self.sessions))
        for call in session.calls.values():
            call.cancel()
        await self._close_instances(session.instances)

    async def close_all(self) -> None:
        for session_id in list(self.sessions):
            await self.close_session(session_id)

    def get(self, session_id: str) -> ServerSession:
        session = self.sessions.get(session_id)
        if session is None:
            raise HTTPException(
                404, f"unknown session {session_id!r} (closed, or never opened on this server)"
            )
        return session

    async def call(
        self, session: ServerSession, name: str, arguments: Any, call_id: str | None
    ) -> ToolResult:
        call_id = call_id or uuid.uuid4().hex
        future = session.calls.get(call_id)
        if future is None:
            future = asyncio.ensure_future(self._run(session, name, arguments, call_id))
            session.calls[call_id] = future
        try:
            # Shielded: a request that goes away (a client timeout, say) must not cancel a call that its
            # retry will come back for.
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            if future.cancelled() and not asyncio.current_task().cancelling():
                return ToolResult.error(
                    call_id, "failed", f"session {session.id} was closed while {name} ran"
                )
            raise

    async def _run(self, session: ServerSession, name: str, arguments: Any, call_id: str) -> ToolResult:
        entry = session.tools.get(name)
        if entry is None:
            result = ToolResult.error(call_id, "not_found", self._not_found_message(session, name))
            self.metrics.observe(_UNKNOWN_TOOL_LABEL if name not in self.tools else name, result)
            return result
        tool, toolset = entry
        if toolset.serial:
            async with session.serial_lock:
                result = await tool.call(arguments, call_id=call_id)
        else:
            result = await tool.call(arguments, call_id=call_id)
        self.metrics.observe(name, result)
        return result

    def _not_found_message(self, session: ServerSession, name: str) -> str:
        available = ", ".join(session.names) or "none"
        if name in self.tools:
            return f"tool {name!r} is not enabled in this session; available tools: {available}"
        return f"unknown tool {name!r}; available tools: {available}"

    def _register(self, names: tuple[str, ...], instances: dict[int, Any]) -> ServerSession:
        tools: dict[str, tuple[FunctionTool, Toolset]] = {}
        for index, instance in instances.items():
            toolset = self.toolsets[index]
            for name, bound in toolset.bind(instance).items():
                if name in names:
                    tools[name] = (bound, toolset)
        session = ServerSession(id=uuid.uuid4().hex, names=names, instances=instances, tools=tools)
        self.sessions[session.id] = session
        self.metrics.sessions.set(len(self.sessions))
        return session

    def _check_names(self, names: Sequence[str]) -> None:
        unknown = [name for name in names if name not in self.tools]
        if unknown:
            raise HTTPException(
                400, f"unknown tools: {', '.join(unknown)}; this server has: {', '.join(self.tools)}"
            )

    async def _close_instances(self, instances: dict[int, Any]) -> None:
        for index, instance in instances.items():
            try:
                await close_instance(instance)
            except Exception:
                logger.exception("closing toolset %s failed", self.toolsets[index].label)


def create_app(
    toolsets: Sequence[object | str], *, token: str | None = None, max_sessions: int = 4096
) -> FastAPI:
    """The tool server app for `toolsets` (tools, modules, toolset classes or dotted paths to them).

    With `token`, every endpoint but `/health` requires `Authorization: Bearer <token>`.
    """
    server = ToolServer(toolsets, max_sessions=max_sessions)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        await server.ensure_setup()
        yield
        await server.close_all()

    app = FastAPI(title="agentrl tool server", lifespan=lifespan)
    app.state.tool_server = server

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "tools": len(server.tools), "sessions": len(server.sessions)}

    app.include_router(_api_router(server), dependencies=[Depends(_bearer_check(token))])
    return app


def _api_router(server: ToolServer) -> APIRouter:
    router = APIRouter()

    @router.get("/metrics")
    async def metrics() -> Response:
        return Response(generate_latest(server.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @router.get("/tools")
    async def tools(names: str | None = None) -> list[dict[str, Any]]:
        return server.schemas([n for n in names.split(",") if n] if names else None)

    @router.post("/sessions")
    async def open_session(request: OpenSessionRequest | None = None) -> dict[str, str]:
        session = await server.open_session(request.tools if request else None)
        return {"session_id": session.id}

    @router.delete("/sessions/{session_id}")
    async def close_session(session_id: str) -> dict[str, str]:
        await server.close_session(session_id)
        return {"session_id": session_id, "status": "closed"}

    @router.post("/sessions/{session_id}/call")
    async def call(session_id: str, request: CallRequest) -> dict[str, Any]:
        session = server.get(session_id)
        result = await server.call(session, request.name, request.arguments, request.call_id)
        return result.to_json()

    @router.post("/sessions/{session_id}/fork")
    async def fork(session_id: str) -> dict[str, str]:
        forked = await server.fork_session(server.get(session_id))
        return {"session_id": forked.id}

    return router


def _bearer_check(token: str | None):
    expected = f"Bearer {token}".encode()

    async def check(authorization: str | None = Header(default=None)) -> None:
        if token is None:
            return
        if authorization is None or not hmac.compare_digest(authorization.encode(), expected):
            raise HTTPException(401, "missing or wrong bearer token", headers={"WWW-Authenticate": "Bearer"})

    return check


def serve(
    toolsets: Sequence[object | str],
    host: str = "127.0.0.1",
    port: int = 8000,
    token: str | None = None,
    *,
    log_level: str = "info",
) -> None:
    """Serve `toolsets` over HTTP until interrupted (blocking)."""
    import uvicorn

    if token is None and host not in ("127.0.0.1", "localhost", "::1"):
        logger.warning("serving tools on %s without a token: anyone who can reach it can run them", host)
    uvicorn.run(create_app(toolsets, token=token), host=host, port=port, log_level=log_level)
