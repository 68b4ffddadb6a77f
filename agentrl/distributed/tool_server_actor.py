"""`ToolServerActor`: the run's toolsets behind a tool server (the `agentrl serve-tools` app) in a Ray actor.

The server listens on a free port of the actor's node, at the node's address, and requires the run's token. Rollout
workers reach it over HTTP like any tool server: the `ToolClient` keeps each session on one server and spreads
sessions over all of them. An actor that dies takes its sessions with it (their episodes end as infrastructure
failures) and its sandboxes too (each sandbox holds a lifeline to the server process: `agentrl/sandbox/bwrap.py`);
Ray restarts it on a new port, and the trainer hands the new address to the workers at the next collect.
"""

from __future__ import annotations

from typing import Any


class ToolServerActor:
    """Serves the toolsets of the run's scaffold (`config`) over HTTP with bearer `token`."""

    def __init__(self, config: Any, token: str, startup_timeout_s: float = 60.0) -> None:
        import ray

        from agentrl.builders import build_scaffold
        from agentrl.toolserver.app import create_app
        from agentrl.toolserver.thread_server import ThreadServer

        scaffold = build_scaffold(config, config.rollout)
        self._app = create_app(list(scaffold.toolsets()), token=token, config=config.tool_server)
        host = ray.util.get_node_ip_address()
        self._server = ThreadServer(self._app, host=host, startup_timeout_s=startup_timeout_s)

    def url(self) -> str:
        """The server's base URL, reachable from the other nodes of the cluster."""
        return self._server.url

    def sessions(self) -> int:
        """Sessions open now."""
        return len(self._app.state.tool_server.sessions)

    def pid(self) -> int:
        """The actor's process id (its sandboxes are that process's children)."""
        import os

        return os.getpid()
