"""The viewer's web app: the static page and the JSON API over one run directory, served by uvicorn.

    GET /                                          the page (static/index.html, view.js, view.css)
    GET /api/run                                   name, settings, steps with their files, metric curves
    GET /api/files/{file}/groups?offset&limit&scaffold&stop_reason&reward_min&reward_max&q
    GET /api/files/{file}/trajectories/{index}     one trajectory, decoded (trajectory_page.py)
    GET /api/files/{file}/tree?group=ID            a group's branch tree
    GET /api/files/{file}/task?task=ID             a task's trajectories in one file

Read-only: there is no route that writes. A file name that is not one of the run's trajectory files, or that leads
outside the run directory, is a 404 with one line saying why. The page gets a Content-Security-Policy that allows
only its own script and style (no inline script, no other origin), and requests must name the host the server
was bound to, so another web site cannot read a run through DNS rebinding.
"""

from __future__ import annotations

import json
import math
import socket
from pathlib import Path
from typing import Any

from agentrl.errors import InputError
from agentrl.view.run_reader import Filters, RunReader

STATIC = Path(__file__).parent / "static"
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]", "::1")


def create_app(run_dir: str | Path, *, host: str = "127.0.0.1") -> Any:
    """The app for `run_dir`; `host` is the address it is served on (requests must name it, or a loopback name)."""
    from fastapi import FastAPI, Request
    from fastapi.responses import FileResponse, JSONResponse, Response
    from fastapi.staticfiles import StaticFiles
    from starlette.middleware.trustedhost import TrustedHostMiddleware

    reader = RunReader(run_dir)

    class SafeJSON(JSONResponse):
        def render(self, content: Any) -> bytes:
            return json.dumps(_finite(content), ensure_ascii=False, separators=(",", ":")).encode()

    app = FastAPI(
        title="agentrl view", docs_url=None, redoc_url=None, openapi_url=None, default_response_class=SafeJSON
    )
    wildcard = host in ("0.0.0.0", "::", "")
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=["*"] if wildcard else [*LOOPBACK_NAMES, host])

    @app.middleware("http")
    async def headers(request: Request, call_next: Any) -> Response:
        response = await call_next(request)
        response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Cache-Control"] = "no-store"  # a live run changes under the same URLs
        return response

    @app.exception_handler(InputError)
    async def not_found(request: Request, error: InputError) -> Response:
        return SafeJSON({"error": str(error)}, status_code=404)

    @app.get("/", include_in_schema=False)
    def page() -> Any:
        return FileResponse(STATIC / "index.html")

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> Any:
        return Response(status_code=204)

    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/api/run")
    def run() -> Any:
        return reader.overview()

    @app.get("/api/files/{name}/groups")
    def groups(
        name: str,
        offset: int = 0,
        limit: int = 20,
        scaffold: str | None = None,
        stop_reason: str | None = None,
        reward_min: float | None = None,
        reward_max: float | None = None,
        q: str | None = None,
    ) -> Any:
        filters = Filters(scaffold or None, stop_reason or None, reward_min, reward_max, q or None)
        return reader.groups(name, filters, max(offset, 0), min(max(limit, 1), 200))

    @app.get("/api/files/{name}/trajectories/{index}")
    def trajectory(name: str, index: int) -> Any:
        return reader.trajectory(name, index)

    @app.get("/api/files/{name}/tree")
    def tree(name: str, group: str) -> Any:
        return reader.tree(name, group)

    @app.get("/api/files/{name}/task")
    def task(name: str, task: str) -> Any:
        return reader.task(name, task)

    return app


def serve(run_dir: str | Path, *, host: str = "127.0.0.1", port: int = 8765, announce: Any = print) -> None:
    """Serve the viewer of `run_dir` until interrupted; `announce` gets the URL once the socket is bound."""
    import uvicorn

    app = create_app(run_dir, host=host)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise InputError(f"cannot listen on {host}:{port}: {e.strerror} (choose another --port)") from None
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    announce(f"http://{shown}:{sock.getsockname()[1]}/")
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()


def _finite(value: Any) -> Any:
    """`value` with NaN and infinities as None (a diverged metric must not break the page's JSON)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
