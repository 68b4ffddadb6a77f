"""examples/mcp_server.py behind `agentrl serve-tools --mcp`: how many server processes its sessions use."""

from __future__ import annotations

import asyncio
import shlex
import sys
from pathlib import Path

import pytest
from test_mcp_tools import EXAMPLE, alive, call, eventually, serve_tools, stop

from agentrl.toolserver.client import ToolClient

pytestmark = pytest.mark.integration


def processes_with(tag: str) -> list[int]:
    """The pids of running processes with `tag` among their arguments."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if tag.encode() in (entry / "cmdline").read_bytes().split(b"\0") and alive(int(entry.name)):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.parametrize("sessions", ["auto", "per_session"])
async def test_the_example_servers_read_only_tools_share_one_process(sessions: str, tmp_path: Path) -> None:
    """examples/mcp_server.py annotates its tools read-only, so by default every session calls one server process
    (no second of start-up per session) and sessions fork; `--mcp-sessions per_session` gives each its own. The
    tool's own ToolError reaches the policy as the call's error text."""
    tag = f"example-{sessions}"
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(EXAMPLE))} {tag}"
    process, url = serve_tools("--mcp", command, "--mcp-sessions", sessions, log=tmp_path / f"serve-{tag}.log")
    try:
        async with ToolClient(url) as tools:
            opened = await asyncio.gather(*(tools.open_session() for _ in range(6)))
            results = await asyncio.gather(
                *(s.call(call("convert", f"c{k}", value=k, source="km", target="mi")) for k, s in enumerate(opened))
            )
            assert [r.text for r in results] == [f"{k * 0.621371:.2f}" for k in range(6)]
            assert len(processes_with(tag)) == (1 if sessions == "auto" else 6)
            refused = await opened[0].call(call("convert", "x", value=1, source="km", target="lb"))
            assert refused.is_error and refused.error_type == "failed"
            assert refused.text.startswith("convert: cannot convert km to lb; known pairs: km→mi")
            if sessions == "auto":
                forked = await opened[0].fork()  # nothing of its own to copy: the fork calls the same server
                assert (await forked.call(call("units", "u"))).text.split() == ["ft", "kg", "km", "lb", "m", "mi"]
                await forked.close()
            for session in opened:
                await session.close()
            assert len(processes_with(tag)) == (1 if sessions == "auto" else 0)  # the shared one lives on
    finally:
        stop(process)
    assert eventually(lambda: not processes_with(tag), timeout_s=20)  # and goes with the tool server
