"""`AppServer`: the bundled web applications on 127.0.0.1, with one private state per episode.

An episode starts at `/start/<key>?next=<path>`, which sets the `agentrl_episode` cookie and redirects to the
application's page; every later request reads and changes that episode's state only, so concurrent episodes never
see each other and a checker reads one episode's state after it ends (`state(key)`). Pages are rendered on the
server and forms post and redirect (post/redirect/get), so a page's address is enough to show it again.

The server is a `ThreadingHTTPServer` in a daemon thread of the process that runs the scaffold
(one per process, `app_server()`); the browser that visits it must run on the same host.
"""

from __future__ import annotations

import collections
import copy
import html
import http.server
import re
import secrets
import threading
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from agentrl.scaffolds.gui.apps import APPS, AppState, Redirect

EPISODE_COOKIE = "agentrl_episode"
MAX_EPISODES = 4096
"""Episode states kept in memory; the oldest are dropped first (their episodes must have ended by then)."""
_KEY = re.compile(r"^[0-9a-f]{8,64}$")


class AppServer:
    """The bundled applications' HTTP server and the per-episode states behind it."""

    def __init__(self) -> None:
        self._states: collections.OrderedDict[str, dict[str, AppState]] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="gui-apps", daemon=True)
        self._thread.start()

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def new_episode(self) -> str:
        """A fresh episode (every application in its initial state); returns its key."""
        return self._add({name: app.initial_state() for name, app in APPS.items()})

    def fork_episode(self, key: str) -> str:
        """A new episode whose applications are in the state episode `key` is in now; returns its key."""
        states = self.state(key)
        if states is None:
            raise KeyError(f"unknown or expired episode {key!r}")
        return self._add(states)

    def _add(self, states: dict[str, AppState]) -> str:
        key = secrets.token_hex(8)
        with self._lock:
            self._states[key] = states
            while len(self._states) > MAX_EPISODES:
                self._states.popitem(last=False)
        return key

    def start_url(self, key: str, path: str) -> str:
        """The address that binds a browser to episode `key` and then shows `path` (which may carry a query)."""
        return f"{self.origin}/start/{key}?next={quote(path, safe='/')}"

    def state(self, key: str) -> dict[str, AppState] | None:
        """A copy of an episode's application states (None for an unknown or expired key)."""
        with self._lock:
            states = self._states.get(key)
            return copy.deepcopy(states) if states is not None else None

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    # --- request handling (called from the server's threads) ----------------------------------------------

    def handle(self, method: str, target: str, cookie: str, form: dict[str, str]) -> tuple[int, dict[str, str], str]:
        """(status, headers, body) for one request."""
        parts = urlsplit(target)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        if parts.path.startswith("/start/"):
            return self._start(parts.path.removeprefix("/start/"), query.get("next", "/"))
        key = _cookie_value(cookie, EPISODE_COOKIE)
        segments = [s for s in parts.path.split("/") if s]
        app = APPS.get(segments[0]) if segments else None
        if app is None:
            links = "".join(f'<li><a href="/{name}">{html.escape(a.title)}</a></li>' for name, a in APPS.items())
            return 200, {}, _page("Apps", f"<h1>Apps</h1><ul>{links}</ul>")
        with self._lock:
            states = self._states.get(key or "")
            if states is None:
                return 403, {}, _page("No episode", "<h1>No episode</h1><p>This browser has no episode.</p>")
            state = states[app.name]
            state.visits.append(parts.path)
            result = app.post(state, segments[1:], form) if method == "POST" else app.get(state, segments[1:], query)
        if isinstance(result, Redirect):
            return 303, {"Location": result.path}, ""
        if result is None:
            return 404, {}, _page("Not found", "<h1>Not found</h1>")
        title, body = result
        return 200, {}, _page(title, body)

    def _start(self, key: str, next_path: str) -> tuple[int, dict[str, str], str]:
        with self._lock:
            known = _KEY.match(key) is not None and key in self._states
        if not known or not next_path.startswith("/"):
            return 404, {}, _page("Not found", "<h1>Unknown episode</h1>")
        cookie = f"{EPISODE_COOKIE}={key}; Path=/; HttpOnly; SameSite=Lax"
        return 303, {"Location": next_path, "Set-Cookie": cookie}, ""


_server: AppServer | None = None
_server_lock = threading.Lock()


def app_server() -> AppServer:
    """This process's application server, started on first use."""
    global _server
    with _server_lock:
        if _server is None:
            _server = AppServer()
        return _server


def _cookie_value(header: str, name: str) -> str | None:
    for part in header.split(";"):
        k, _, v = part.strip().partition("=")
        if k == name:
            return v
    return None


_STYLE = (
    "body{font-family:sans-serif;max-width:40em;margin:1em auto;padding:0 1em}"
    "form{margin:.5em 0}label{display:block;margin:.3em 0}.error{color:#b00}.note{color:#060}"
)


def _page(title: str, body: str) -> str:
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{_STYLE}</style></head><body>{body}</body></html>"
    )


def _handler(server: AppServer) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out as separate writes; with Nagle's algorithm each response would wait ~40 ms.
        disable_nagle_algorithm = True

        def do_GET(self) -> None:  # noqa: N802 - the name http.server dispatches to
            self._respond("GET", {})

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length).decode("utf-8", "replace") if length else ""
            self._respond("POST", {k: v[-1] for k, v in parse_qs(raw, keep_blank_values=True).items()})

        def _respond(self, method: str, form: dict[str, str]) -> None:
            status, headers, body = server.handle(method, self.path, self.headers.get("Cookie", ""), form)
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # requests are not worth a log line each
            pass

    return Handler
