"""Benchmark the `gui` toolset through a real HTTP tool server: actions per second and browser memory per session.

    python scripts/bench_gui.py [--actions 40] [--concurrent 4] [--sessions 8]

Actions: `click` on a checkbox (the page stays), `click` on a submit button (post, redirect, new page) and
`observe`, each returning the page outline, first in one session and then in `--concurrent` sessions at once.
Memory: the resident set (RSS) and proportional set (PSS, shared pages split between processes) of every
chromium process this script started, with `--sessions` sessions open on a page against none, divided by that
number. Prints one JSON object. Figures from a 2-core machine are in docs/experiments/gui.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

from agentrl.scaffolds.gui.app_server import app_server
from agentrl.tools.gui import Browser

from agentrl.testing import serve_in_thread
from agentrl.toolserver.app import create_app
from agentrl.toolserver.client import ToolClient
from agentrl.types import ToolCall

# Numbers of the settings page's elements in its outline.
NEWSLETTER_CHECKBOX = 5
SAVE_BUTTON = 6


async def _call(session: Any, name: str, **arguments: Any) -> Any:
    result = await session.call(ToolCall(os.urandom(6).hex(), name, arguments))
    if result.is_error:
        raise RuntimeError(f"{name} failed: {result.text}")
    return result


async def _open_on_settings(tools: ToolClient) -> Any:
    server = app_server()
    session = await tools.open_session()
    await _call(session, "navigate", url=server.start_url(server.new_episode(), "/settings"))
    return session


async def _rate(sessions: list[Any], actions: int, name: str, **arguments: Any) -> float:
    """Actions per second over all `sessions`, each running `actions` calls one after another."""

    async def run(session: Any) -> None:
        for _ in range(actions):
            await _call(session, name, **arguments)

    start = time.perf_counter()
    await asyncio.gather(*(run(s) for s in sessions))
    return round(len(sessions) * actions / (time.perf_counter() - start), 1)


def _chromium_pids() -> list[int]:
    """Processes descended from this one whose executable is chromium."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                parents[int(entry.name)] = int(fields[1])
            except (OSError, IndexError, ValueError):
                continue

    def descends(pid: int) -> bool:
        while pid > 1:
            pid = parents.get(pid, 0)
            if pid == os.getpid():
                return True
        return False

    out = []
    for pid in parents:
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if "chrom" in name and descends(pid):
            out.append(pid)
    return out


def _memory_mib() -> dict[str, float]:
    """Summed RSS and PSS of the chromium processes, in MiB."""
    rss = pss = 0
    for pid in _chromium_pids():
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Rss:"):
                    rss += int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss += int(line.split()[1])
        except OSError:
            continue
    return {"rss_mib": round(rss / 1024, 1), "pss_mib": round(pss / 1024, 1)}


async def bench(base_url: str, actions: int, concurrent: int, sessions: int) -> dict[str, Any]:
    async with ToolClient(base_url) as tools:
        warm = await tools.open_session()  # the first session launches the browser; it opens no page
        await warm.close()
        await asyncio.sleep(1.0)
        idle = _memory_mib()

        one = [await _open_on_settings(tools)]
        many = one + [await _open_on_settings(tools) for _ in range(concurrent - 1)]
        rates = {
            "observe_1_session": await _rate(one, actions, "observe"),
            "click_in_page_1_session": await _rate(one, actions, "click", id=NEWSLETTER_CHECKBOX),
            "click_submit_1_session": await _rate(one, actions, "click", id=SAVE_BUTTON),
            f"click_in_page_{concurrent}_sessions": await _rate(many, actions, "click", id=NEWSLETTER_CHECKBOX),
            f"click_submit_{concurrent}_sessions": await _rate(many, actions, "click", id=SAVE_BUTTON),
        }
        for session in many:
            await session.close()
        await asyncio.sleep(1.0)

        start = time.perf_counter()
        opened = [await _open_on_settings(tools) for _ in range(sessions)]
        open_s = (time.perf_counter() - start) / sessions
        await asyncio.sleep(1.0)
        loaded = _memory_mib()
        for session in opened:
            await session.close()
    per_session = {k: round((loaded[k] - idle[k]) / sessions, 1) for k in idle}
    return {
        "actions_per_s": rates,
        "session_open_and_first_page_s": round(open_s, 3),
        "memory": {"no_sessions": idle, f"{sessions}_sessions": loaded, "per_session": per_session},
        "chromium_processes": len(_chromium_pids()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actions", type=int, default=40, help="calls per measurement and session")
    parser.add_argument("--concurrent", type=int, default=4, help="sessions acting at once")
    parser.add_argument("--sessions", type=int, default=8, help="sessions open for the memory measurement")
    args = parser.parse_args()
    with serve_in_thread(create_app([Browser])) as base_url:
        result = asyncio.run(bench(base_url, args.actions, args.concurrent, args.sessions))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
