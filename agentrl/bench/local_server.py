"""Starting a server process on 127.0.0.1 for a benchmark and waiting until it answers `/health`."""

from __future__ import annotations

import socket
import subprocess
import time

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(command: list[str], port: int, *, timeout_s: float = 60.0) -> subprocess.Popen:
    """Run `command` (which must serve on `port`) and return it once `GET /health` answers 200."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return process
        except httpx.TransportError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError(f"{' '.join(command[:4])} … did not serve on port {port} within {timeout_s:.0f} s")
