"""Scale-out: several tool-server processes on loopback behind one `ToolClient`.

The servers are real `agentrl serve-tools` processes. They serve `Ledger`, a toolset written to a temporary
module: `whoami` tells which process runs a session, and `record` appends to a file, so side effects can be
counted from outside the servers.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from agentrl.toolserver.client import HTTPToolSession, SessionNotFound, ToolClient, ToolServerUnavailable
from agentrl.types import ToolCall

pytestmark = pytest.mark.integration

LEDGER_MODULE = '''
"""Tools for the scale-out tests."""
import asyncio
import os
from typing import Annotated

from agentrl.tool import tool


class Ledger:
    @tool
    def whoami(self) -> int:
        """The process id of the server running this session."""
        return os.getpid()

    @tool
    async def record(self, key: Annotated[str, "Line to append."], seconds: Annotated[float, "Sleep after."] = 0):
        """Append a line to the ledger file, then sleep; returns how many lines the ledger has."""
        with open(os.environ["LEDGER_PATH"], "a") as ledger:
            ledger.write(key + "\\n")
        await asyncio.sleep(seconds)
        with open(os.environ["LEDGER_PATH"]) as ledger:
            return sum(1 for _ in ledger)
'''


@dataclass
class Servers:
    urls: list[str]
    processes: list[subprocess.Popen[bytes]]
    env: dict[str, str]
    ledger: Path

    def start(self, index: int) -> None:
        port = self.urls[index].rsplit(":", 1)[1]
        command = [sys.executable, "-m", "agentrl.cli.app", "serve-tools", "--tools", "scale_out_tools:Ledger"]
        self.processes[index] = subprocess.Popen(
            [*command, "--port", port], env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        wait_healthy(self.urls[index], self.processes[index])

    def lines(self) -> list[str]:
        return self.ledger.read_text().splitlines() if self.ledger.exists() else []


def consecutive_free_ports(count: int) -> int:
    # Below Linux's ephemeral range (32768-60999): a port the kernel hands out for binding to 0 has neighbours it
    # hands out next as the source ports of connections, such as the health checks of the server just started.
    for _ in range(50):
        first = random.randrange(20000, 32768 - count)
        try:
            for port in range(first, first + count):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return first
    raise RuntimeError("no run of free ports found")


def wait_healthy(url: str, process: subprocess.Popen, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert process.poll() is None, f"server for {url} exited with {process.returncode}"
        try:
            if httpx.get(f"{url}/health", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.05)
    raise TimeoutError(f"{url} did not start")


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "scale_out_tools.py").write_text(LEDGER_MODULE)
    path = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "LEDGER_PATH": str(tmp_path / "ledger.txt")}


@pytest.fixture
def servers(env: dict[str, str]) -> Iterator[Servers]:
    port = consecutive_free_ports(2)
    urls = [f"http://127.0.0.1:{port + i}" for i in range(2)]
    group = Servers(urls, [None, None], env, Path(env["LEDGER_PATH"]))  # type: ignore[list-item]
    try:
        for index in range(2):
            group.start(index)
        yield group
    finally:
        for process in group.processes:
            if process is not None:
                stop(process)


def call(name: str, call_id: str = "", **arguments) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


async def test_sessions_spread_and_stick(servers: Servers) -> None:
    async with ToolClient(servers.urls) as tools:
        sessions = await asyncio.gather(*(tools.open_session() for _ in range(8)))
        answers = await asyncio.gather(*(s.call(call("whoami")) for s in sessions for _ in range(5)))
        pids = [int(a.content) for a in answers]
        assert [h["sessions"] for h in await tools.health()] == [4, 4]
    server_pids = {p.pid for p in servers.processes}
    for index, session in enumerate(sessions):
        served_by = set(pids[index * 5 : index * 5 + 5])
        assert len(served_by) == 1  # every request of a session reached the same process
        assert served_by == {servers.processes[servers.urls.index(session.base_url.rstrip("/"))].pid}
    assert sorted(pids.count(pid) for pid in server_pids) == [20, 20]


async def test_killed_server_fails_its_sessions_fast_while_the_other_serves(servers: Servers) -> None:
    async with ToolClient(servers.urls, retries=3, backoff_s=0.1, down_for_s=1.0) as tools:
        sessions = await asyncio.gather(*(tools.open_session() for _ in range(6)))
        doomed = [s for s in sessions if s.base_url.rstrip("/") == servers.urls[0]]
        alive = [s for s in sessions if s not in doomed]
        assert len(doomed) == len(alive) == 3

        in_flight = asyncio.create_task(doomed[0].call(call("record", key="slow", seconds=30)))
        await asyncio.sleep(0.5)  # the call is running on server 0 now
        servers.processes[0].send_signal(signal.SIGKILL)
        started = time.monotonic()
        with pytest.raises(ToolServerUnavailable):
            await in_flight
        assert time.monotonic() - started < 3.0  # typed and fast: the call does not wait its 30 s

        started = time.monotonic()
        for session in doomed[1:]:
            with pytest.raises(ToolServerUnavailable, match="is down"):
                await session.call(call("whoami"))
        assert time.monotonic() - started < 0.5  # marked down: no retry cycle per session

        survivor_pid = servers.processes[1].pid
        assert {int((await s.call(call("whoami"))).content) for s in alive} == {survivor_pid}
        fresh = [await tools.open_session() for _ in range(3)]
        assert {s.base_url.rstrip("/") for s in fresh} == {servers.urls[1]}  # new sessions avoid the dead one

        # A server restarted on the same port has lost the old sessions: they fail as unknown, not as retries.
        await asyncio.to_thread(servers.start, 0)
        await asyncio.sleep(1.0)  # past down_for_s
        with pytest.raises(SessionNotFound):
            await doomed[1].call(call("whoami"))
        reopened = await tools.open_session()
        assert reopened.base_url.rstrip("/") == servers.urls[0]  # the least loaded again, and up
        assert int((await reopened.call(call("whoami"))).content) == servers.processes[0].pid
    assert servers.lines() == ["slow"]


async def test_retried_call_runs_once(servers: Servers) -> None:
    # The first attempt times out on the client after 0.5 s while the server keeps running the call; the retry
    # carries the same call_id, so the server answers it with the one run's result.
    async with ToolClient(servers.urls[:1], timeout_s=0.5, retries=3, backoff_s=0.05) as tools:
        session = await tools.open_session()
        started = time.monotonic()
        result = await session.call(call("record", "once", key="once", seconds=1.2))
        waited_s = time.monotonic() - started
        again = await session.call(call("record", "once", key="once", seconds=1.2))
        other = await session.call(call("record", "twice", key="twice"))
    assert waited_s > 1.0  # longer than one attempt may take: it was retried
    assert (result.content, result.call_id, again.content) == ("1", "once", "1")
    assert other.content == "2"
    assert servers.lines() == ["once", "twice"]


def test_serve_tools_replicas(env: dict[str, str], tmp_path: Path) -> None:
    port = consecutive_free_ports(2)
    output = tmp_path / "replicas.out"
    command = [sys.executable, "-m", "agentrl.cli.app", "serve-tools", "--tools", "scale_out_tools:Ledger"]
    with output.open("wb") as sink:
        parent = subprocess.Popen(
            [*command, "--port", str(port), "--replicas", "2", "--set", "max_sessions=1"],
            env=env,
            stdout=sink,
            stderr=subprocess.DEVNULL,
        )
    try:
        deadline = time.monotonic() + 60
        while "tool_servers=" not in output.read_text():
            assert parent.poll() is None and time.monotonic() < deadline, output.read_text()
            time.sleep(0.05)
        lines = output.read_text().splitlines()
        announced = [line.split()[2] for line in lines if line.startswith("tool server ")]
        urls = [f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port + 1}"]
        assert announced == urls
        assert f"tool_servers={urls[0]},{urls[1]}" in lines
        child_pids = [int(line.rsplit("pid ", 1)[1].rstrip(")")) for line in lines if line.startswith("tool server ")]

        async def whoami_per_session() -> list[int]:
            async with ToolClient(urls, retries=0) as tools:
                sessions = [await tools.open_session() for _ in range(2)]
                # `--set max_sessions=1` reached every replica: a third session is refused by both.
                with pytest.raises(ToolServerUnavailable, match="session limit reached"):
                    await tools.open_session()
                return [int((await s.call(call("whoami"))).content) for s in sessions]

        assert sorted(asyncio.run(whoami_per_session())) == sorted(child_pids)
        parent.send_signal(signal.SIGTERM)
        assert parent.wait(timeout=15) == 128 + signal.SIGTERM
        for pid in child_pids:
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
        for url in urls:
            with pytest.raises(httpx.ConnectError):
                httpx.get(f"{url}/health", timeout=1.0)
    finally:
        stop(parent)


class HangUp:
    """A TCP server that reads each request and closes the connection without answering, counting requests."""

    def __init__(self) -> None:
        self.requests: list[bytes] = []

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def __aexit__(self, *exc_info: object) -> None:
        self.server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.requests.append((await reader.readuntil(b"\r\n")).split()[1])
        writer.close()


async def test_only_requests_the_server_deduplicates_are_retried_after_it_may_have_run_them() -> None:
    hang_up = HangUp()
    async with hang_up as url, ToolClient(url, retries=2, backoff_s=0.01) as tools:
        with pytest.raises(ToolServerUnavailable, match="after 1 attempt "):
            await tools.open_session()  # may have opened a session: not sent again
        assert hang_up.requests == [b"/sessions"]
        assert not tools.is_down(0)  # it accepted the connection: slow or crashed, not gone
        session = HTTPToolSession(tools, 0, "s1")  # a session id the hanging-up server never answers for
        with pytest.raises(ToolServerUnavailable, match="after 3 attempts"):
            await session.call(call("whoami", "c1"))  # idempotent by call_id: retried
        assert hang_up.requests[1:] == [b"/sessions/s1/call"] * 3


def test_the_server_keeps_idle_connections_longer_than_the_client_pool(servers: Servers) -> None:
    """A pooled connection reused after httpx's keep-alive expiry (5 s) must still be open on the server: at
    uvicorn's default (also 5 s) a request could go out on a connection the server was closing, and fail."""
    import http.client

    host, port = servers.urls[0].removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        for wait_s in (0.0, 6.0):
            time.sleep(wait_s)
            connection.request("GET", "/health")  # the same socket: http.client reconnects only when told
            response = connection.getresponse()
            assert response.status == 200
            response.read()
    finally:
        connection.close()
