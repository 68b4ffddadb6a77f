"""The tool client against real servers on loopback when the network is not kind: tokens, two servers, a server
that starts late or never, a full server, a response lost on the way back, a server in another process."""

import asyncio
import re
import socket
import sys
from collections.abc import Iterator
from contextlib import ExitStack

import httpx
import pytest

from agentrl.testing import ECHO_STAMP, metric_value, serve_in_thread
from agentrl.toolserver.app import create_app
from agentrl.toolserver.client import ToolClient, ToolServerError, ToolServerUnavailable
from agentrl.types import ToolCall

pytestmark = pytest.mark.integration

TOOLSETS = ["agentrl.testing", "agentrl.testing:Counter"]


def call(name: str, call_id: str, **arguments: object) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def server_url() -> Iterator[str]:
    with serve_in_thread(create_app(TOOLSETS)) as url:
        yield url


async def test_token_auth() -> None:
    with serve_in_thread(create_app(TOOLSETS, token="s3cret")) as url:
        async with httpx.AsyncClient(base_url=url) as raw:
            assert (await raw.get("/health")).status_code == 200
            for method, path in [("GET", "/tools"), ("GET", "/metrics"), ("POST", "/sessions")]:
                assert (await raw.request(method, path)).status_code == 401
            wrong = await raw.get("/tools", headers={"Authorization": "Bearer nope"})
            assert wrong.status_code == 401
        async with ToolClient(url) as anonymous:
            with pytest.raises(ToolServerError) as raised:
                await anonymous.open_session()
            assert raised.value.status_code == 401
        async with ToolClient(url, token="s3cret") as tools:
            session = await tools.open_session(["echo"])
            assert (await session.call(call("echo", "t", text="ok"))).content == f"echo[{ECHO_STAMP}]: ok"


async def test_sticky_routing_over_two_servers() -> None:
    with serve_in_thread(create_app(TOOLSETS)) as url_a, serve_in_thread(create_app(TOOLSETS)) as url_b:
        async with ToolClient([url_a, url_b]) as tools:
            sessions = await asyncio.gather(*(tools.open_session() for _ in range(6)))
            by_server = {url: [s for s in sessions if s.base_url.rstrip("/") == url] for url in (url_a, url_b)}
            assert [len(v) for v in by_server.values()] == [3, 3]
            assert [h["sessions"] for h in await tools.health()] == [3, 3]
            for count, group in enumerate(by_server.values(), start=1):
                for session in group:
                    for k in range(count):
                        await session.call(call("increment", f"i{k}"))
                    assert (await session.call(call("value", "v"))).content == str(count)
            async with httpx.AsyncClient() as raw:
                for url, expected in ((url_a, 3), (url_b, 6)):
                    text = (await raw.get(f"{url}/metrics")).text
                    assert metric_value(text, "agentrl_tool_calls_total", tool="increment") == expected
            forks = [await s.fork() for s in by_server[url_a]]
            assert all(f.base_url == by_server[url_a][0].base_url for f in forks)
            assert [h["sessions"] for h in await tools.health()] == [6, 3]


async def test_retry_waits_for_a_server_that_starts_late() -> None:
    port = free_port()
    with ExitStack() as stack:

        async def start_late() -> None:
            await asyncio.sleep(0.4)
            await asyncio.to_thread(stack.enter_context, serve_in_thread(create_app(TOOLSETS), port=port))

        async with ToolClient(f"http://127.0.0.1:{port}", retries=6, backoff_s=0.1) as tools:
            session, _ = await asyncio.gather(tools.open_session(["echo"]), start_late())
            assert (await session.call(call("echo", "late", text="x"))).content == f"echo[{ECHO_STAMP}]: x"


async def test_unreachable_server_raises_tool_server_unavailable() -> None:
    async with ToolClient(f"http://127.0.0.1:{free_port()}", retries=2, backoff_s=0.01) as tools:
        with pytest.raises(ToolServerUnavailable, match="unreachable after 3 attempts"):
            await tools.open_session()


async def test_session_limit() -> None:
    async with ToolClient(app=create_app(TOOLSETS, max_sessions=1), retries=1, backoff_s=0.01) as tools:
        first = await tools.open_session()
        with pytest.raises(ToolServerUnavailable, match="session limit reached"):
            await tools.open_session()
        await first.close()
        await tools.open_session()


class DroppingProxy:
    """A TCP proxy that forwards a request matching `marker` but hangs up instead of relaying its response.

    The server runs the request; the client sees the connection close and must retry.
    """

    def __init__(self, upstream_port: int, marker: bytes, drops: int = 1) -> None:
        self.upstream_port = upstream_port
        self.marker = marker
        self.drops = drops
        self.server: asyncio.Server | None = None

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        dropping = False

        async def forward_requests() -> None:
            nonlocal dropping
            while data := await reader.read(65536):
                if self.marker in data and self.drops > 0:
                    self.drops -= 1
                    dropping = True
                upstream_writer.write(data)
                await upstream_writer.drain()

        async def forward_responses() -> None:
            while data := await upstream_reader.read(65536):
                if dropping:
                    break
                writer.write(data)
                await writer.drain()
            writer.close()
            upstream_writer.close()

        await asyncio.gather(forward_requests(), forward_responses(), return_exceptions=True)

    async def close(self) -> None:
        assert self.server is not None
        self.server.close()


async def test_call_retry_after_lost_response_keeps_call_id(server_url: str) -> None:
    proxy = DroppingProxy(int(server_url.rsplit(":", 1)[1]), marker=b"/call", drops=1)
    proxy_url = await proxy.start()
    try:
        async with ToolClient(proxy_url, retries=3, backoff_s=0.05) as tools:
            session = await tools.open_session(["increment", "value"])
            result = await session.call(call("increment", "once", by=7))
            assert proxy.drops == 0  # the first response really was lost
            assert result.content == "7" and result.call_id == "once"
            assert (await session.call(call("value", "check"))).content == "7"
        async with httpx.AsyncClient() as raw:
            text = (await raw.get(f"{server_url}/metrics")).text
        assert metric_value(text, "agentrl_tool_calls_total", tool="increment") == 1
    finally:
        await proxy.close()


async def test_serve_in_a_subprocess() -> None:
    port = free_port()
    toolsets = ["agentrl.testing", "agentrl.testing:Counter"]
    code = (
        f"from agentrl.toolserver.app import serve; serve({toolsets!r}, port={port}, token='tok', log_level='warning')"
    )
    process = await asyncio.create_subprocess_exec(sys.executable, "-c", code)
    try:
        async with ToolClient(f"http://127.0.0.1:{port}", token="tok", retries=8, backoff_s=0.1) as tools:
            session = await tools.open_session(["echo"])
            result = await session.call(call("echo", "sub", text="hi"))
            assert re.fullmatch(r"echo\[[0-9a-f]{16}\]: hi", result.content)
            assert ECHO_STAMP not in result.content  # another process, another stamp
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), timeout=10)
