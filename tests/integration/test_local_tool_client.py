"""The in-process tool backend without HTTP answers as the HTTP client does over the same server."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from agentrl.errors import SessionNotFound, ToolServerError, ToolServerUnavailable
from agentrl.testing import ECHO_STAMP
from agentrl.toolserver.app import create_app
from agentrl.toolserver.client import ToolClient
from agentrl.toolserver.config import ToolServerConfig
from agentrl.toolserver.local_client import LocalToolClient
from agentrl.toolserver.sessions import ToolSessions
from agentrl.types import ToolCall

pytestmark = pytest.mark.integration

TOOLSETS = ["agentrl.testing", "agentrl.testing:Counter"]


IDS = itertools.count()


def call(name: str, **arguments) -> ToolCall:
    return ToolCall(id=f"c{next(IDS)}", name=name, arguments=arguments)  # a repeated id is the same call


async def episode(tools) -> list[tuple[str, bool, str | None]]:
    """Calls, a fork that diverges, bad arguments and an unknown tool, as (text, is_error, error_type)."""
    session = await tools.open_session()
    results = [await session.call(call("increment", by=2)), await session.call(call("echo", text="hi"))]
    fork = await session.fork()
    results += [await fork.call(call("increment", by=5)), await session.call(call("value"))]
    results += [await fork.call(call("value")), await session.call(call("increment", by="two"))]
    results += [await session.call(call("nope")), await session.call(call("echo", text=float("nan")))]
    await fork.close()
    await session.close()
    await session.close()  # idempotent
    return [(r.text, r.is_error, r.error_type) for r in results]


async def test_the_same_episode_gives_the_same_results_as_over_http():
    over_http = ToolClient(app=create_app(TOOLSETS))
    local = LocalToolClient(ToolSessions(TOOLSETS))
    try:
        expected, got = await episode(over_http), await episode(local)
    finally:
        await over_http.aclose()
        await local.aclose()
    assert got == expected
    assert [e for _, e, _ in got] == [False, False, False, False, False, True, True, True]
    assert [t for t, _, _ in got[:5]] == ["2", f"echo[{ECHO_STAMP}]: hi", "7", "2", "7"]
    assert local.server.sessions == {}
    assert await LocalToolClient(ToolSessions(TOOLSETS)).schemas(["echo"]) == await ToolClient(
        app=create_app(TOOLSETS)
    ).schemas(["echo"])


async def test_refusals_and_lost_sessions_raise_what_the_http_client_raises():
    server = ToolSessions(TOOLSETS, ToolServerConfig(max_sessions=1))
    tools = LocalToolClient(server, retries=2, backoff_s=0.01)
    first = await tools.open_session()
    with pytest.raises(ToolServerUnavailable, match="session limit"):  # still refused after every retry
        await tools.open_session()

    async def close_soon():
        await asyncio.sleep(0.005)
        await first.close()

    closing = asyncio.ensure_future(close_soon())
    second = await tools.open_session()  # a refusal for load is retried: the first closed meanwhile
    await closing
    await server.close_session(second.session_id)  # expired, say
    with pytest.raises(SessionNotFound):
        await second.call(call("value"))
    await second.close()  # a session the server dropped counts as closed
    with pytest.raises(ToolServerError, match="unknown tools"):
        await tools.open_session(["nope"])
    await tools.aclose()
