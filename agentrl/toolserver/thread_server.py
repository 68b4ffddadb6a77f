"""`ThreadServer`: an ASGI app served by uvicorn in a daemon thread of this process.

What a tool-server Ray actor runs its app with (`agentrl/distributed/tool_server_actor.py`), and what tests serve
real apps with (`agentrl.testing.serve_in_thread`). The socket is bound before the thread starts, so no other
process can take the port in between.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

from agentrl.errors import InfraError


class ThreadServer:
    """`app` on `host:port` (0: a free port) until `stop()`."""

    def __init__(self, app: Any, *, host: str = "127.0.0.1", port: int = 0, startup_timeout_s: float = 10.0) -> None:
        import uvicorn

        from agentrl.toolserver.app import KEEP_ALIVE_S

        # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets that say so, and Nagle's algorithm
        # would add ~40 ms to every request.
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind((host, port))
        self.host, self.startup_timeout_s = host, startup_timeout_s
        config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_keep_alive=KEEP_ALIVE_S)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + startup_timeout_s
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                self.socket.close()
                raise InfraError(f"the server on {host} did not start")
            time.sleep(0.01)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.socket.getsockname()[1]}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=self.startup_timeout_s)
        self.socket.close()
