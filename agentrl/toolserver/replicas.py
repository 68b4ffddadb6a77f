"""`ToolServerReplicas`: several tool-server processes on consecutive ports (`agentrl serve-tools --replicas N`).

Replicas are separate processes on separate ports, not `uvicorn --workers N` on one port: a session's state
(interpreters, shells, workspaces, toolset instances) lives in the process that opened it, and with workers
sharing a port the kernel hands each connection to any of them, so the requests of one session would reach
processes that do not know it. With one port per process, `ToolClient` (given every URL, e.g. through the
`tool_servers` config field) sends each session to one server and spreads sessions across them.

Each replica is a plain `agentrl serve-tools` child process; the token reaches it through the environment, not
its command line. The children are stopped with the parent (SIGTERM, then SIGKILL after a grace period) and, on
Linux, also when the parent dies without cleaning up. A replica that exits is reported and not restarted: its
sessions are gone with its process, and clients get `ToolServerUnavailable` or `SessionNotFound` for them.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence

import httpx

from agentrl.errors import ConfigError, InfraError

logger = logging.getLogger(__name__)

TOKEN_ENV = "AGENTRL_TOOL_SERVER_TOKEN"
"""Environment variable the `serve-tools` token option also reads (how replicas receive the token)."""


class ToolServerReplicas:
    """`replicas` tool servers of `tools` on `host`, ports `port`, `port + 1`, …; a context manager."""

    def __init__(
        self,
        tools: str,
        *,
        replicas: int,
        host: str = "127.0.0.1",
        port: int = 8000,
        token: str | None = None,
        stop_grace_s: float = 10.0,
        config: str | os.PathLike[str] | None = None,
        overrides: Sequence[str] = (),
    ) -> None:
        if replicas < 1:
            raise ConfigError(f"replicas must be at least 1, got {replicas}")
        self.tools = tools
        self.host = host
        self.ports = [port + i for i in range(replicas)]
        self.token = token
        self.stop_grace_s = stop_grace_s
        self.config = config
        self.overrides = list(overrides)
        """`serve-tools --config` file and `--set` overrides every replica gets (ToolServerConfig)."""
        self.processes: list[subprocess.Popen[bytes]] = []

    @property
    def urls(self) -> list[str]:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return [f"http://{host}:{port}" for port in self.ports]

    def start(self, ready_timeout_s: float = 60.0) -> list[str]:
        """Start every replica and wait until each answers `/health`; returns their URLs."""
        env = dict(os.environ)
        if self.token:
            env[TOKEN_ENV] = self.token
        for port in self.ports:
            command = [sys.executable, "-m", "agentrl.cli.app", "serve-tools", "--tools", self.tools]
            command += ["--host", self.host, "--port", str(port)]
            command += ["--config", str(self.config)] if self.config is not None else []
            for override in self.overrides:
                command += ["--set", override]
            self.processes.append(subprocess.Popen(command, env=env, preexec_fn=_die_with_parent()))
        try:
            for url, process in zip(self.urls, self.processes, strict=True):
                _wait_healthy(url, process, time.monotonic() + ready_timeout_s)
        except BaseException:
            self.stop()
            raise
        return self.urls

    def wait(self) -> int:
        """Block until every replica has exited, reporting each exit; returns the first non-zero exit code."""
        running = dict(enumerate(self.processes))
        code = 0
        while running:
            for index, process in list(running.items()):
                if process.poll() is not None:
                    del running[index]
                    logger.warning(
                        "tool server %s (pid %d) exited with %d", self.urls[index], process.pid, process.returncode
                    )
                    code = code or process.returncode
            time.sleep(0.2)
        return code

    def stop(self) -> None:
        """SIGTERM every replica (uvicorn then closes its sessions), SIGKILL those still running after the grace."""
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.stop_grace_s
        for process in self.processes:
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def __enter__(self) -> ToolServerReplicas:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _wait_healthy(url: str, process: subprocess.Popen[bytes], deadline: float) -> None:
    while True:
        if process.poll() is not None:
            raise InfraError(f"tool server for {url} exited with {process.returncode} before it was ready")
        try:
            if httpx.get(f"{url}/health", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"tool server for {url} did not answer /health in time")
        time.sleep(0.05)


def _die_with_parent() -> Callable[[], None] | None:
    """A pre-exec hook asking Linux to SIGTERM the child when the parent dies (None elsewhere)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_pdeathsig = 1

    def hook() -> None:
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM)

    return hook
