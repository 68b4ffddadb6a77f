"""The tool server over real HTTP on loopback (uvicorn), and the same scenarios in-process (ASGI transport)."""

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack
from typing import Annotated, ClassVar

import httpx
import pytest

from agentrl.errors import ConfigError
from agentrl.testing import ECHO_STAMP, Counter, metric_value, serve_in_thread
from agentrl.tool import tool
from agentrl.toolserver.app import create_app
from agentrl.toolserver.client import SessionNotFound, ToolClient, ToolServerError
from agentrl.types import ToolCall

pytestmark = pytest.mark.integration

TOOLSETS = ["agentrl.testing", "agentrl.testing:Counter"]


class Sleeper:
    """Slow tools with per-session state, to make calls overlap and observe how many did."""

    def __init__(self) -> None:
        self.runs = 0
        self.active = 0
        self.peak = 0

    @tool
    async def nap(self, seconds: Annotated[float, "How long to sleep."]) -> int:
        """Sleep, then count the run."""
        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            await asyncio.sleep(seconds)
        finally:
            self.active -= 1
        self.runs += 1
        return self.runs

    @tool
    def runs_so_far(self) -> int:
        """How many naps finished in this session."""
        return self.runs

    @tool
    def peak_overlap(self) -> int:
        """The most naps that ran at once in this session."""
        return self.peak


class SerialSleeper(Sleeper):
    """A Sleeper whose calls run one at a time per session."""

    serial = True


class Lifecycle:
    """Records setup, fork and close."""

    setups: ClassVar[int] = 0
    closed: ClassVar[list[str]] = []

    def __init__(self, label: str = "original") -> None:
        self.label = label

    @classmethod
    def setup(cls) -> None:
        cls.setups += 1

    @tool
    def label_of(self) -> str:
        """The instance's label."""
        return self.label

    def fork(self) -> "Lifecycle":
        return Lifecycle(f"fork of {self.label}")

    async def close(self) -> None:
        Lifecycle.closed.append(self.label)


def call(name: str, call_id: str, **arguments: object) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


@pytest.fixture
def server_url() -> Iterator[str]:
    with serve_in_thread(create_app([*TOOLSETS, Sleeper])) as url:
        yield url


@pytest.fixture(params=["http", "asgi"])
async def client(request: pytest.FixtureRequest) -> AsyncIterator[ToolClient]:
    """The same client over a real uvicorn server and over the in-process ASGI transport."""
    with ExitStack() as stack:
        app = create_app([*TOOLSETS, Sleeper])
        if request.param == "http":
            tools = ToolClient(stack.enter_context(serve_in_thread(app)))
        else:
            tools = ToolClient(app=app)
        async with tools:
            yield tools


async def test_health_and_schemas(client: ToolClient) -> None:
    assert await client.health() == [{"status": "ok", "tools": 6, "sessions": 0}]
    names = [s["function"]["name"] for s in await client.schemas()]
    assert names == ["echo", "increment", "value", "nap", "runs_so_far", "peak_overlap"]
    only = await client.schemas(["echo"])
    assert only[0]["function"]["parameters"]["required"] == ["text"]
    assert len(only) == 1


async def test_stamped_echo_round_trip(client: ToolClient) -> None:
    session = await client.open_session(["echo"])
    result = await session.call(call("echo", "c1", text="hello"))
    assert result.content == f"echo[{ECHO_STAMP}]: hello"
    assert result.call_id == "c1" and not result.is_error
    assert (await client.health())[0]["sessions"] == 1
    await session.close()
    assert (await client.health())[0]["sessions"] == 0


async def test_errors_are_results(client: ToolClient) -> None:
    session = await client.open_session(["echo", "increment"])
    unknown = await session.call(call("nope", "u"))
    assert unknown.is_error and unknown.error_type == "not_found" and "nope" in unknown.content
    not_enabled = await session.call(call("value", "v"))
    assert not_enabled.error_type == "not_found" and "not enabled" in not_enabled.content
    bad = await session.call(call("increment", "b", by="lots"))
    assert bad.error_type == "bad_arguments" and "field 'by'" in bad.content
    missing = await session.call(call("echo", "m"))
    assert missing.error_type == "bad_arguments" and "field 'text': Field required" in missing.content
    for value in (float("nan"), "\ud800", 10**2000):  # cannot travel as JSON: the caller's mistake, not the server's
        unsendable = await session.call(call("echo", "x", text=value))
        assert unsendable.error_type == "bad_arguments" and "not valid JSON" in unsendable.content


async def test_unknown_tools_in_session_request_are_rejected(client: ToolClient) -> None:
    with pytest.raises(ToolServerError, match="unknown tools: nope") as raised:
        await client.open_session(["echo", "nope"])
    assert raised.value.status_code == 400


async def test_repeated_call_id_runs_once(client: ToolClient) -> None:
    session = await client.open_session()
    first = await session.call(call("increment", "same", by=2))
    again = await session.call(call("increment", "same", by=2))
    assert first.content == again.content == "2"
    assert (await session.call(call("value", "v1"))).content == "2"


async def test_concurrent_duplicates_share_the_running_call(client: ToolClient) -> None:
    session = await client.open_session(["nap", "runs_so_far"])
    results = await asyncio.gather(*(session.call(call("nap", "dup", seconds=0.3)) for _ in range(3)))
    assert [r.content for r in results] == ["1", "1", "1"]
    assert (await session.call(call("runs_so_far", "r"))).content == "1"


async def test_calls_of_one_session_run_in_parallel(client: ToolClient) -> None:
    session = await client.open_session(["nap", "peak_overlap"])
    results = await asyncio.gather(*(session.call(call("nap", f"p{i}", seconds=0.5)) for i in range(4)))
    assert sorted(r.content for r in results) == ["1", "2", "3", "4"]
    assert (await session.call(call("peak_overlap", "peak"))).content == "4"


async def test_fork_copies_state_then_diverges(client: ToolClient) -> None:
    original = await client.open_session(["increment", "value"])
    await original.call(call("increment", "a", by=3))
    fork = await original.fork()
    assert fork.session_id != original.session_id
    assert (await fork.call(call("value", "b"))).content == "3"
    await original.call(call("increment", "c", by=1))
    await fork.call(call("increment", "c", by=10))  # call ids are per session: this one runs
    assert (await original.call(call("value", "d"))).content == "4"
    assert (await fork.call(call("value", "d"))).content == "13"
    enabled = await fork.call(call("echo", "e", text="x"))
    assert enabled.error_type == "not_found"  # a fork keeps its parent's tool subset


async def test_sessions_are_independent(client: ToolClient) -> None:
    first, second = await client.open_session(), await client.open_session()
    await first.call(call("increment", "x", by=5))
    assert (await second.call(call("value", "x"))).content == "0"


async def test_closed_session_is_a_clear_error(client: ToolClient) -> None:
    session = await client.open_session()
    await session.close()
    await session.close()  # idempotent
    with pytest.raises(SessionNotFound, match="unknown session"):
        await session.call(call("echo", "after", text="x"))
    with pytest.raises(SessionNotFound):
        await session.fork()


async def test_metrics_count_calls_and_errors(client: ToolClient) -> None:
    session = await client.open_session()
    await session.call(call("echo", "1", text="a"))
    await session.call(call("echo", "1", text="a"))  # a replay is not a second call
    await session.call(call("echo", "2", text="b"))
    await session.call(call("increment", "3", by="x"))
    response = await client._client(0, 0).get("/metrics")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert metric_value(text, "agentrl_tool_calls_total", tool="echo") == 2
    assert metric_value(text, "agentrl_tool_errors_total", tool="increment", error_type="bad_arguments") == 1
    assert metric_value(text, "agentrl_tool_call_seconds_count", tool="echo") == 2
    assert metric_value(text, "agentrl_tool_sessions_active") == 1


async def test_malformed_requests_are_4xx(client: ToolClient) -> None:
    http = client._client(0, 0)
    session_id = (await http.post("/sessions")).json()["session_id"]
    no_name = await http.post(f"/sessions/{session_id}/call", json={"arguments": {}})
    assert no_name.status_code == 422 and "name" in no_name.text
    not_json = await http.post(
        f"/sessions/{session_id}/call", content=b"{nope", headers={"content-type": "application/json"}
    )
    assert not_json.status_code == 422
    gone = await http.delete("/sessions/does-not-exist")
    assert gone.status_code == 404 and "does-not-exist" in gone.json()["detail"]
    string_arguments = await http.post(
        f"/sessions/{session_id}/call", json={"name": "echo", "arguments": '{"text": "s"}'}
    )
    assert string_arguments.json()["content"] == f"echo[{ECHO_STAMP}]: s"


async def test_serial_toolset_runs_one_call_at_a_time() -> None:
    async with ToolClient(app=create_app([SerialSleeper])) as tools:
        session = await tools.open_session()
        await asyncio.gather(*(session.call(call("nap", f"s{i}", seconds=0.05)) for i in range(3)))
        assert (await session.call(call("runs_so_far", "r"))).content == "3"
        assert (await session.call(call("peak_overlap", "p"))).content == "1"


@pytest.mark.parametrize("transport", ["http", "asgi"])
async def test_lifecycle_setup_once_fork_hook_and_close(transport: str) -> None:
    Lifecycle.setups, Lifecycle.closed = 0, []
    app = create_app([Lifecycle, Counter])
    with ExitStack() as stack:
        tools = ToolClient(stack.enter_context(serve_in_thread(app))) if transport == "http" else ToolClient(app=app)
        async with tools:
            first = await tools.open_session()
            second = await tools.open_session()
            assert Lifecycle.setups == 1
            fork = await first.fork()
            assert (await fork.call(call("label_of", "l"))).content == "fork of original"
            assert (await second.call(call("label_of", "l"))).content == "original"
            await fork.close()
            assert Lifecycle.closed == ["fork of original"]
            counter_only = await tools.open_session(["increment"])
            await counter_only.close()
            assert Lifecycle.closed == ["fork of original"]  # the session never made a Lifecycle
    assert sorted(Lifecycle.closed) == ["fork of original", "original", "original"]


def test_duplicate_tool_names_are_rejected() -> None:
    with pytest.raises(ValueError, match="'echo' is defined by both"):

        @tool(name="echo")
        def other_echo(text: Annotated[str, "Text."]) -> str:
            """Another echo."""
            return text

        create_app(["agentrl.testing", other_echo])


def test_dotted_path_forms_resolve() -> None:
    for spec in ("agentrl.testing.Counter", "agentrl.testing:Counter"):
        assert create_app([spec]).state.tool_server.tools.keys() == {"increment", "value"}
    with pytest.raises(ConfigError, match="'agentrl.testing' has no attribute 'Nothing'"):
        create_app(["agentrl.testing:Nothing"])


async def test_a_fork_whose_requester_hung_up_is_closed_at_once(server_url: str) -> None:
    """A rollout cancelled while its fork was being made never learns the new session's id: the server closes
    that session itself instead of leaving it to the idle reaper."""

    async def open_sessions(raw: httpx.AsyncClient) -> float:
        return metric_value((await raw.get(f"{server_url}/metrics")).text, "agentrl_tool_sessions_active")

    async with ToolClient(server_url) as tools, httpx.AsyncClient() as raw:
        session = await tools.open_session()
        napping = asyncio.create_task(session.call(ToolCall(id="n", name="nap", arguments={"seconds": 1.0})))
        await asyncio.sleep(0.2)
        fork = asyncio.create_task(session.fork())  # the fork waits for the nap to end
        await asyncio.sleep(0.2)
        fork.cancel()
        with pytest.raises(asyncio.CancelledError):
            await fork
        await napping
        deadline = asyncio.get_running_loop().time() + 5
        while await open_sessions(raw) != 1 and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
        assert await open_sessions(raw) == 1
        forked = await session.fork()  # a fork nobody abandoned stays open
        assert await open_sessions(raw) == 2
        await forked.close()
        await session.close()
