"""Load and fault test: 200 concurrent sessions × 20 calls each through `agentrl serve-tools`, with sandbox
processes killed at random while the calls run.

Every call must get exactly one answer (its result, or a typed error for the calls whose worker was killed),
no call may run twice (each call appends its id to a file in its workspace, read back at the end), the server's
memory must not grow from one round of load to the next, and no sandbox process or workspace may remain after
the sessions end and the server stops.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from agentrl.sandbox.processes import alive, descendants
from agentrl.toolserver.client import ToolClient
from agentrl.types import ToolCall

pytestmark = pytest.mark.slow

SESSIONS = 200
CALLS = 20
KILLS_PER_ROUND = 40


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


@pytest.fixture
def server():
    root = Path(tempfile.mkdtemp(prefix="agentrl-load-"))
    root.chmod(0o755)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [sys.executable, "-m", "agentrl.cli.app", "serve-tools", "--tools", "code", "--port", str(port)]
    for setting in (f"sandbox.root_dir={root}", "sandbox.call_timeout_s=20", "max_sessions=400"):
        command += ["--set", setting]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            assert process.poll() is None and time.monotonic() < deadline, "the tool server did not start"
            time.sleep(0.2)
    yield url, process, root
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=60)
    try:
        assert list(root.iterdir()) == [], "workspaces outlived the server"
    finally:
        os.system(f"rm -rf {root}")


async def kill_at_random(server_pid: int, count: int, stop: asyncio.Event, rng: random.Random) -> list[int]:
    """SIGKILL `count` sandbox processes (bwrap, keeper or worker: any process below the server), spread out."""
    killed: list[int] = []
    while len(killed) < count and not stop.is_set():
        await asyncio.sleep(rng.uniform(0.02, 0.15))
        victims = [pid for pid in descendants(server_pid)[1:] if pid not in killed]
        if victims:
            victim = rng.choice(victims)
            try:
                os.kill(victim, signal.SIGKILL)
                killed.append(victim)
            except ProcessLookupError:
                pass
    return killed


async def one_round(tools: ToolClient, sessions: list, round_no: int) -> dict[str, list]:
    """Every session runs CALLS calls in turn; returns each call id's answers (a list, to catch duplicates)."""
    answers: dict[str, list] = {}

    async def run(index: int, session) -> None:
        for k in range(CALLS):
            call_id = f"r{round_no}-s{index}-c{k}"
            code = f"with open('calls.log', 'a') as f:\n    f.write('{call_id}\\n')\nprint('{call_id}')"
            try:
                result = await session.call(ToolCall(id=call_id, name="python", arguments={"code": code}))
                answers.setdefault(call_id, []).append(result)
            except Exception as exc:  # an untyped failure: recorded so the assertion below names it
                answers.setdefault(call_id, []).append(exc)

    await asyncio.gather(*(run(i, s) for i, s in enumerate(sessions)))
    return answers


async def load_and_faults(url: str, server_pid: int) -> None:
    rng = random.Random(7)
    async with ToolClient(url, timeout_s=120) as tools:
        sessions = await asyncio.gather(*(tools.open_session(["python"]) for _ in range(SESSIONS)))
        rss_by_round = []
        kills = []
        started = time.monotonic()
        all_answers: dict[str, list] = {}
        for round_no in range(2):
            stop = asyncio.Event()
            killer = asyncio.create_task(kill_at_random(server_pid, KILLS_PER_ROUND, stop, rng))
            answers = await one_round(tools, sessions, round_no)
            stop.set()
            killed = await killer
            kills.append(len(killed))
            assert len(killed) >= KILLS_PER_ROUND // 2, f"the run ended before enough kills ({len(killed)})"
            all_answers.update(answers)
            rss_by_round.append(rss_mb(server_pid))

        # Exactly one answer per call, each a result: the text on success, a typed sandbox error otherwise.
        assert len(all_answers) == 2 * SESSIONS * CALLS
        assert all(len(a) == 1 for a in all_answers.values())
        untyped = [a[0] for a in all_answers.values() if not hasattr(a[0], "is_error")]
        assert not untyped, f"{len(untyped)} calls raised instead of answering, e.g. {untyped[0]!r}"
        errors = Counter(a[0].error_type for a in all_answers.values() if a[0].is_error)
        odd = {a[0].error_type: a[0].text for a in all_answers.values() if a[0].is_error}
        assert set(errors) <= {"sandbox_error"}, (errors, odd)
        for call_id, (result,) in all_answers.items():
            assert result.is_error or result.text == call_id, (call_id, result)
        assert 0 < sum(errors.values()) < 0.2 * len(all_answers), errors

        # No call ran twice: each workspace's log holds every successful call once, and no id twice. A worker
        # killed after its session's last call reports that on the next call, which then starts a new one.
        async def read_log(index: int, session) -> object:
            for attempt in range(2):
                code = "print(open('calls.log').read())"
                log = await session.call(ToolCall(id=f"log-{index}-{attempt}", name="python", arguments={"code": code}))
                if not log.is_error:
                    break
            return log

        logs = await asyncio.gather(*(read_log(i, s) for i, s in enumerate(sessions)))
        for index, log in enumerate(logs):
            assert not log.is_error, log
            ran = Counter(log.text.split())
            assert max(ran.values()) == 1, f"session {index} ran a call twice: {ran.most_common(1)}"
            for round_no in range(2):
                for k in range(CALLS):
                    call_id = f"r{round_no}-s{index}-c{k}"
                    if not all_answers[call_id][0].is_error:
                        assert ran[call_id] == 1, f"{call_id} answered but not in the log"

        # Memory: the second round of load costs the server no more than a little.
        assert rss_by_round[1] - rss_by_round[0] < 64, rss_by_round
        print(
            f"\n{len(all_answers)} calls in {time.monotonic() - started:.1f}s, {sum(kills)} sandbox processes "
            f"killed, {sum(errors.values())} sandbox_error answers, server RSS per round {rss_by_round} MB"
        )
        await asyncio.gather(*(s.close() for s in sessions))

    deadline = time.monotonic() + 30
    while len(descendants(server_pid)) > 1 and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    left = [pid for pid in descendants(server_pid)[1:] if alive(pid)]
    assert not left, f"sandbox processes left after every session closed: {left}"


def test_200_sessions_with_random_kills_lose_and_duplicate_nothing(server) -> None:
    url, process, _ = server
    asyncio.run(load_and_faults(url, process.pid))
