"""An MCP server's tools through the tool server: `agentrl serve-tools --mcp` as a real process, over stdio and
over streamable HTTP, and in-process under the react scaffold.

The MCP server is a script written to a temporary directory, made with the `mcp` package: a per-session counter
(per MCP session, so that the HTTP variant shows isolation too), a tool that refuses, a tool with a typed
schema, its process id, a tool that kills its own process, a slow tool and a tool that returns an image.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from agentrl.scaffolds.react import ReactScaffold

from agentrl.config import RolloutConfig
from agentrl.errors import ConfigError, InfraError
from agentrl.testing import ECHO_STAMP, ScriptedPolicy, echo
from agentrl.toolserver.app import create_app
from agentrl.toolserver.client import ToolClient, ToolServerError
from agentrl.toolserver.mcp_toolset import mcp_toolset
from agentrl.types import StopReason, Task, ToolCall

pytestmark = pytest.mark.integration

SERVER = '''
"""An MCP server for agentrl's tests."""
import asyncio
import os
import sys
from pathlib import Path
from typing import Literal

from pydantic import BaseModel
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

if Path(__file__).with_name("refuse_to_start").exists():
    sys.exit("refusing to start: the marker file exists")

server = MCPServer("agentrl-test", log_level="WARNING")
counts = {}


class Point(BaseModel):
    x: int
    y: int = 0


@server.tool()
def bump(ctx: Context, by: int = 1) -> int:
    """Add to this MCP session's counter and return its new value."""
    key = (ctx.headers or {}).get("mcp-session-id")
    counts[key] = counts.get(key, 0) + by
    return counts[key]


@server.tool()
def refuse(reason: str) -> str:
    """Fail with the reason given."""
    raise ToolError(f"refused: {reason}")


@server.tool()
def boom() -> str:
    """Crash with an exception the SDK does not pass on."""
    raise RuntimeError("a traceback only the server's log shows")


@server.tool()
def place(name: str, where: Point, side: Literal["north", "south"] = "north") -> str:
    """Put a named marker on the grid."""
    return f"{name} at ({where.x}, {where.y}) on the {side} side"


@server.tool()
def pid() -> int:
    """The process id of this server."""
    return os.getpid()


@server.tool()
def crash() -> str:
    """Exit the server process at once."""
    os._exit(3)


@server.tool()
async def nap(seconds: float) -> str:
    """Sleep, then say so."""
    await asyncio.sleep(seconds)
    return "awake"


@server.tool()
def picture() -> list:
    """A caption and a small image."""
    return ["a tiny picture", Image(data=b"\\x89PNG\\r\\n", format="png")]


if __name__ == "__main__":
    if sys.argv[1:2] == ["--http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
'''
TOOL_NAMES = {"bump", "refuse", "boom", "place", "pid", "crash", "nap", "picture"}
EXAMPLE = Path(__file__).parents[2] / "examples" / "mcp_server.py"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("mcp")
    (path / "server.py").write_text(SERVER)
    return path


@pytest.fixture(scope="module")
def command(workdir: Path) -> str:
    """The stdio server's command line, `python server.py` with this interpreter."""
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(workdir / 'server.py'))}"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def serve_tools(*args: str, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`agentrl serve-tools ARGS` on a free port, once healthy; its output goes to `log`."""
    port = free_port()
    command = [sys.executable, "-m", "agentrl.cli.app", "serve-tools", *args, "--port", str(port)]
    with log.open("ab") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"serve-tools exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=1.0).status_code == 200:
                return process, url
        except httpx.TransportError:
            time.sleep(0.1)
    stop(process)
    raise TimeoutError(f"serve-tools did not start:\n{log.read_text()[-3000:]}")


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def alive(pid: int) -> bool:
    """Whether the process runs (a zombie, exited but not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def eventually(condition: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def call(name: str, call_id: str, /, **arguments: object) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


@pytest.fixture(scope="module")
def stdio_url(command: str, workdir: Path) -> Iterator[str]:
    process, url = serve_tools("--mcp", command, "--set", "tool_timeout_s=1", log=workdir / "serve-stdio.log")
    try:
        yield url
    finally:
        stop(process)


async def test_schemas_come_from_the_servers_listing(stdio_url: str) -> None:
    async with ToolClient(stdio_url) as tools:
        schemas = {s["function"]["name"]: s["function"] for s in await tools.schemas()}
    assert set(schemas) == TOOL_NAMES  # only the MCP server's tools: no echo without --tools
    assert schemas["refuse"]["description"] == "Fail with the reason given."
    place = schemas["place"]["parameters"]
    assert place["required"] == ["name", "where"]
    assert place["properties"]["side"] == {"default": "north", "enum": ["north", "south"], "type": "string"}
    where = place["properties"]["where"]  # the model's `$ref` is written out, as for a Python tool
    assert where["type"] == "object" and where["required"] == ["x"] and "$defs" not in place
    assert "title" not in json.dumps(place)


async def test_calls_results_and_typed_errors(stdio_url: str) -> None:
    async with ToolClient(stdio_url) as tools:
        session = await tools.open_session()
        placed = await session.call(call("place", "c1", name="flag", where={"x": 2}, side="south"))
        assert not placed.is_error and placed.text == "flag at (2, 0) on the south side"
        refused = await session.call(call("refuse", "c2", reason="no"))  # MCP isError: data for the policy
        assert refused.is_error and refused.error_type == "failed" and refused.text == "refuse: refused: no"
        bad = await session.call(call("place", "c3", name=3))
        assert bad.is_error and bad.error_type == "bad_arguments"
        assert "'where' is a required property" in bad.text and "field 'name'" in bad.text
        unknown = await session.call(call("nope", "c4"))
        assert unknown.error_type == "not_found"
        picture = await session.call(call("picture", "c5"))
        assert picture.text == "a tiny picture\n[image: image/png, 6 bytes]"
        slow = await session.call(call("nap", "c6", seconds=30))  # the server's tool_timeout_s is 1 s
        assert slow.is_error and slow.error_type == "timeout"
        assert (await session.call(call("bump", "c7"))).text == "1"  # the session goes on after all of those
        await session.close()


async def test_each_session_has_its_own_server_process(stdio_url: str) -> None:
    async with ToolClient(stdio_url) as tools:
        first, second = await tools.open_session(), await tools.open_session()
        for k in range(3):
            counted = await first.call(call("bump", f"a{k}", by=2))
        assert counted.text == "6"
        assert (await second.call(call("bump", "b0"))).text == "1"
        pids = [int((await s.call(call("pid", "p"))).text) for s in (first, second)]
        assert pids[0] != pids[1] and all(alive(pid) for pid in pids)
        await first.close()
        assert not alive(pids[0]), "closing the session stops its server process"
        assert alive(pids[1])
        await second.close()
        assert not alive(pids[1])


async def test_a_server_that_dies_is_an_infrastructure_failure(stdio_url: str) -> None:
    async with ToolClient(stdio_url) as tools:
        session = await tools.open_session()
        pid = int((await session.call(call("pid", "p"))).text)
        with pytest.raises(ToolServerError, match="HTTP 500.*is gone") as died:
            await session.call(call("crash", "c1"))
        assert isinstance(died.value, InfraError)  # the rollout ends the episode as INFRA_ERROR, never a zero
        with pytest.raises(ToolServerError, match="is gone"):
            await session.call(call("bump", "c2"))
        assert eventually(lambda: not alive(pid))
        await session.close()


def test_a_killed_tool_server_leaves_no_server_process(command: str, workdir: Path) -> None:
    process, url = serve_tools("--mcp", command, log=workdir / "serve-killed.log")
    try:
        opened = httpx.post(f"{url}/sessions", json={}, timeout=30).json()["session_id"]
        reply = httpx.post(f"{url}/sessions/{opened}/call", json={"name": "pid", "arguments": {}}, timeout=30)
        pid = int(reply.json()["content"])
        assert alive(pid)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
        assert eventually(lambda: not alive(pid)), "the server exits when its stdin closes with the tool server"
    finally:
        stop(process)


@pytest.fixture(scope="module")
def http_server(workdir: Path) -> Iterator[tuple[str, int]]:
    port = free_port()
    with (workdir / "mcp-http.log").open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, str(workdir / "server.py"), "--http", str(port)], stdout=out, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        assert eventually(lambda: _accepts(port) or process.poll() is not None, timeout_s=60)
        assert process.poll() is None, (workdir / "mcp-http.log").read_text()
        yield url, process.pid
    finally:
        stop(process)


def _accepts(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


async def test_streamable_http_server_one_mcp_session_per_session(http_server: tuple[str, int], workdir: Path) -> None:
    url, server_pid = http_server
    process, tool_server = serve_tools("--mcp", url, "--mcp-prefix", "net_", log=workdir / "serve-http.log")
    try:
        async with ToolClient(tool_server) as tools:
            names = {s["function"]["name"] for s in await tools.schemas()}
            assert names == {f"net_{name}" for name in TOOL_NAMES}
            first, second = await tools.open_session(), await tools.open_session()
            await first.call(call("net_bump", "a0", by=5))
            assert (await first.call(call("net_bump", "a1"))).text == "6"
            assert (await second.call(call("net_bump", "b0"))).text == "1"  # a fresh MCP session: its own count
            assert {(await s.call(call("net_pid", "p"))).text for s in (first, second)} == {str(server_pid)}
            refused = await second.call(call("net_refuse", "b1", reason="over HTTP"))
            assert refused.error_type == "failed" and refused.text.endswith("refused: over HTTP")
            await first.close()
            await second.close()
    finally:
        stop(process)


async def test_in_process_sessions_spec_strings_and_refusals(command: str, workdir: Path) -> None:
    toolset = mcp_toolset(command, prefix="a_")
    with pytest.raises(ConfigError, match="defined by both"):
        create_app([toolset, mcp_toolset(command, prefix="a_")])
    app = create_app([toolset, f"mcp:{command}"])  # two servers apart by the prefix; a spec string
    async with ToolClient(app=app) as tools:
        assert len(await tools.schemas()) == 2 * len(TOOL_NAMES)
        session = await tools.open_session(["a_bump", "bump", "boom"])
        assert (await session.call(call("a_bump", "c1"))).text == "1"
        assert (await session.call(call("bump", "c2", by=3))).text == "3"
        crashed = await session.call(call("boom", "c3"))  # the SDK withholds an unexpected exception's text
        assert crashed.is_error and crashed.error_type == "failed"
        assert crashed.text == "boom failed; the server gave no reason"
        with pytest.raises(ToolServerError, match="HTTP 409.*cannot be forked"):
            await session.fork()
        await session.close()
        marker = workdir / "refuse_to_start"
        marker.touch()  # from now on the server exits as it starts
        try:
            with pytest.raises(ToolServerError, match="HTTP 500.*did not start"):
                await tools.open_session()
        finally:
            marker.unlink()


def test_serve_tools_refuses_a_server_that_does_not_start(workdir: Path) -> None:
    missing = workdir / "no-such-server"
    result = subprocess.run(
        [sys.executable, "-m", "agentrl.cli.app", "serve-tools", "--mcp", str(missing), "--port", str(free_port())],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == [result.stderr.splitlines()[-1]]  # one line, the last
    assert errors[0].startswith(f"error: MCP server {missing} did not start: FileNotFoundError")


async def test_react_episode_calls_an_mcp_tool(command: str, tiny_tokenizer: object) -> None:
    scaffold = ReactScaffold(tools=[echo, mcp_toolset(command)], rollout=RolloutConfig(max_turns=3))
    assert set(scaffold.tool_names() or ()) == TOOL_NAMES | {"echo"}  # MCP tools are offered beside Python ones

    def turn(name: str, **arguments: object) -> str:
        return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"

    task = Task(id="mcp/0", prompt="Count to 2, echo it, then answer.", answer="2")
    played = ScriptedPolicy(tiny_tokenizer, [turn("bump", by=2), turn("echo", text="2"), "2"])
    crashed = ScriptedPolicy(tiny_tokenizer, [turn("crash"), "2"])
    app = create_app(list(scaffold.toolsets()))
    async with ToolClient(app=app) as tools:
        episode, failed = await asyncio.gather(
            scaffold.run(task, played, tools, group_id="g", trajectory_id="g/0"),
            scaffold.run(task, crashed, tools, group_id="g", trajectory_id="g/1"),
        )
        assert not app.state.tool_server.sessions  # both episodes closed their sessions
    assert episode.stop_reason is StopReason.ANSWERED and episode.answer == "2"
    counted, echoed = episode.turns[0].tool_results[0], episode.turns[1].tool_results[0]
    assert counted.text == "2" and not counted.is_error
    assert ECHO_STAMP in echoed.text
    assert failed.stop_reason is StopReason.INFRA_ERROR and "is gone" in (failed.error or "")
