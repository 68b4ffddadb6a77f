"""`ToolServerActor`: the run's toolsets behind a tool server (the `agentrl serve-tools` app) in a Ray actor.

The server listens on a free port of the actor's node, at the node's address, and requires the run's token. Rollout
workers reach it over HTTP like any tool server: the `ToolClient` keeps each session on one server and spreads
sessions over all of them. An actor that dies takes its sessions with it (their episodes end as infrastructure
failures) and its sandboxes too (each sandbox holds a lifeline to the server process: `agentrl/sandbox/bwrap.py`);
Ray restarts it on a new port, and the trainer hands the new address to the workers at the next collect.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

from agentrl.errors import InfraError


class ToolServerActor:
    """Serves the toolsets of the run's scaffold (`config`) over HTTP with bearer `token`."""

    def __init__(self, config: Any, token: str, startup_timeout_s: float = 60.0) -> None:
        import ray
        import uvicorn

        from agentrl.registry import build_scaffold
        from agentrl.toolserver.app import KEEP_ALIVE_S, create_app

        scaffold = build_scaffold(config, config.rollout)
        app = create_app(list(scaffold.toolsets()), token=token, config=config.tool_server)
        self.host = ray.util.get_node_ip_address()
        # bound before the server thread starts, so the port cannot be taken in between; TCP_NODELAY needs
        # IPPROTO_TCP said explicitly for asyncio to set it
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((self.host, 0))
        self._server = uvicorn.Server(
            uvicorn.Config(app, log_level="warning", lifespan="on", timeout_keep_alive=KEEP_ALIVE_S)
        )
        self._app = app
        thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True)
        thread.start()
        deadline = time.monotonic() + startup_timeout_s
        while not self._server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise InfraError(f"the tool server on {self.host} did not start")
            time.sleep(0.01)

    def url(self) -> str:
        """The server's base URL, reachable from the other nodes of the cluster."""
        return f"http://{self.host}:{self._socket.getsockname()[1]}"

    def sessions(self) -> int:
        """Sessions open now."""
        return len(self._app.state.tool_server.sessions)

    def pid(self) -> int:
        """The actor's process id (its sandboxes are that process's children)."""
        import os

        return os.getpid()
