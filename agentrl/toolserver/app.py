"""The tool server: toolsets behind the HTTP API of DESIGN §5, as a FastAPI app.

    GET    /health                  {"status": "ok", "tools": N, "sessions": M}   (open even with a token)
    GET    /metrics                 Prometheus text
    GET    /tools[?names=a,b]       OpenAI function-tool schemas
    POST   /sessions                {"tools": [...]?, "network": false} → {"session_id"}
    DELETE /sessions/{id}           closes the session's toolset instances and its sandbox
    POST   /sessions/{id}/call      {"name", "arguments", "call_id"?} → a ToolResult as JSON
    POST   /sessions/{id}/fork      → {"session_id"} of a copy of the session's state

Tool failures are results with `is_error: true` and HTTP 200; only malformed requests (4xx), unknown sessions
(404), load limits (503, with `Retry-After`; the client backs off and retries) and infrastructure that failed
under a session (500: the MCP server behind a call died, say) are HTTP errors. A session
made for a requester that hung up meanwhile (open or fork) is closed at once. The state
behind the app — sessions, sandboxes, admission control, expiry — is `agentrl.toolserver.sessions.ToolSessions`.

`create_app` serves under uvicorn (`serve`) or in-process through `httpx.ASGITransport`
(`ToolClient(app=...)`); toolset setup runs at startup or, where no lifespan events come, before the first
session.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Header, HTTPException, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel

from agentrl.errors import InfraError, one_line
from agentrl.toolserver.config import ToolServerConfig
from agentrl.toolserver.sessions import SessionError, ToolSessions

logger = logging.getLogger(__name__)

KEEP_ALIVE_S = 65
"""How long the server keeps an idle connection open. Longer than any client's pool keeps one (httpx: 5 s): at
uvicorn's default, also 5 s, a client could send a request on a connection the server was closing that instant,
and the request failed with a ReadError although the server was up."""


class OpenSessionRequest(BaseModel):
    tools: list[str] | None = None
    """Names of the tools the session may call; all tools when absent."""
    network: bool = False
    """Whether the session's sandbox may reach the network (refused unless the server allows it)."""


class CallRequest(BaseModel):
    name: str
    arguments: dict[str, Any] | str | None = None
    """An object, or the JSON string a model produced."""
    call_id: str | None = None
    """Idempotency key: a repeated id returns the stored result without running the tool again."""


def create_app(
    toolsets: Sequence[object | str],
    *,
    token: str | None = None,
    max_sessions: int | None = None,
    config: ToolServerConfig | None = None,
) -> FastAPI:
    """The tool server app for `toolsets` (tools, modules, toolset classes or dotted paths to them).

    With `token`, every endpoint but `/health` requires `Authorization: Bearer <token>`.
    """
    config = config or ToolServerConfig()
    if max_sessions is not None:
        config = replace(config, max_sessions=max_sessions)
    server = ToolSessions(toolsets, config)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        await server.ensure_setup()
        yield
        await server.close_all()

    app = FastAPI(title="agentrl tool server", lifespan=lifespan)
    app.state.tool_server = server

    @app.exception_handler(SessionError)
    async def session_error(request: Request, exc: SessionError) -> JSONResponse:
        headers = {"Retry-After": "1"} if exc.status == 503 else None
        return JSONResponse({"detail": str(exc)}, status_code=exc.status, headers=headers)

    @app.exception_handler(InfraError)
    async def infra_error(request: Request, exc: InfraError) -> JSONResponse:
        # Not a tool's failure for the policy to read: the client raises it, and the episode ends as INFRA_ERROR.
        return JSONResponse({"detail": one_line(exc)}, status_code=500)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "tools": len(server.tools), "sessions": len(server.sessions)}

    app.include_router(_api_router(server), dependencies=[Depends(_bearer_check(token))])
    return app


def _api_router(server: ToolSessions) -> APIRouter:
    router = APIRouter()

    @router.get("/metrics")
    async def metrics() -> Response:
        server.metrics.sandboxes.set(server.sandboxes.active)
        return Response(generate_latest(server.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @router.get("/tools")
    async def tools(names: str | None = None) -> list[dict[str, Any]]:
        return server.schemas([n for n in names.split(",") if n] if names else None)

    async def reply_or_close(http: Request, session_id: str) -> dict[str, str]:
        # A requester that hung up while its session was made (a cancelled rollout) never learns the id, and
        # the session, sandbox and all, would wait for the idle reaper: close it now.
        if await http.is_disconnected():
            await server.close_session(session_id)
        return {"session_id": session_id}

    @router.post("/sessions")
    async def open_session(http: Request, request: OpenSessionRequest | None = None) -> dict[str, str]:
        request = request or OpenSessionRequest()
        session = await server.open_session(request.tools, network=request.network)
        return await reply_or_close(http, session.id)

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
    async def fork(http: Request, session_id: str) -> dict[str, str]:
        forked = await server.fork_session(server.get(session_id))
        return await reply_or_close(http, forked.id)

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
    config: ToolServerConfig | None = None,
    log_level: str = "info",
) -> None:
    """Serve `toolsets` over HTTP until interrupted (blocking)."""
    import uvicorn

    if token is None and host not in ("127.0.0.1", "localhost", "::1"):
        logger.warning("serving tools on %s without a token: anyone who can reach it can run them", host)
    app = create_app(toolsets, token=token, config=config)
    uvicorn.run(app, host=host, port=port, log_level=log_level, timeout_keep_alive=KEEP_ALIVE_S)
