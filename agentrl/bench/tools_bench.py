"""`agentrl bench tools`: latency and throughput of sandboxed code calls through the tool server's HTTP API.

The server runs in a process of its own (uvicorn on 127.0.0.1), as in training, and the load comes from
`ToolClient` sessions in this process. Three measurements in one run, on the same machine and server:

- one_session: `print(1)` in a long-lived sandboxed interpreter, one call at a time (the floor of latency);
- at_target_rate: calls arriving at `rate_per_s` (Poisson) spread over `sessions` sessions: latency under the
  target load (the p50 target applies here);
- persistent: as fast as `sessions` sessions can go, each calling again as soon as it has its answer
  (throughput at saturation; latency there is queueing: sessions / throughput);
- baseline: the same call, through the same HTTP path, where each call starts a fresh bubblewrap sandbox
  running `python3 -c` (the per-call-process pattern most agent-RL tool servers use);
- fork: `POST /sessions/{id}/fork` of a session holding interpreter variables, shell state and files.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from agentrl.bench.local_server import free_port, start_server
from agentrl.tool import tool
from agentrl.toolserver.client import ToolClient
from agentrl.types import ToolCall

TARGETS = {"p50_ms": 15.0, "calls_per_s": 150.0, "speedup_vs_baseline": 5.0, "fork_p50_ms": 50.0}


class FreshProcessPython:
    """The baseline toolset: every call starts a new sandbox running `python3 -c code` and waits for it."""

    uses_sandbox = True

    def __init__(self, sandbox: Any) -> None:
        self.sandbox = sandbox

    @tool
    async def python_once(self, code: str) -> str:
        """Run Python code in a fresh sandboxed process.

        Args:
            code: Python source.
        """
        result = await self.sandbox.provider.run_once(code, timeout_s=self.sandbox.config.call_timeout_s)
        return result.as_text()


@dataclass(frozen=True)
class LoadResult:
    calls: int
    errors: int
    seconds: float
    latencies_s: list[float]

    def summary(self) -> dict[str, float]:
        ordered = sorted(self.latencies_s)
        return {
            "calls": self.calls,
            "errors": self.errors,
            "calls_per_s": round(self.calls / self.seconds, 1),
            "p50_ms": round(1000 * statistics.median(ordered), 2),
            "p99_ms": round(1000 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 2),
        }


async def _load(client: ToolClient, tool_name: str, sessions: int, seconds: float) -> LoadResult:
    opened = [await client.open_session([tool_name]) for _ in range(sessions)]
    code = {"code": "print(1)"}
    await asyncio.gather(*(s.call(ToolCall(id="warm", name=tool_name, arguments=code)) for s in opened))
    latencies: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds

    async def loop(session: Any, index: int) -> None:
        nonlocal errors
        n = 0
        while time.perf_counter() < deadline:
            start = time.perf_counter()
            result = await session.call(ToolCall(id=f"{index}-{n}", name=tool_name, arguments=code))
            latencies.append(time.perf_counter() - start)
            errors += result.is_error or result.text.strip() != "1"
            n += 1

    start = time.perf_counter()
    await asyncio.gather(*(loop(s, i) for i, s in enumerate(opened)))
    elapsed = time.perf_counter() - start
    await asyncio.gather(*(s.close() for s in opened))
    return LoadResult(len(latencies), errors, elapsed, latencies)


async def _paced(client: ToolClient, sessions: int, rate_per_s: float, seconds: float) -> LoadResult:
    """Open loop: calls arrive at `rate_per_s` in all (Poisson), each on a random idle session; latency under a
    given load, unaffected by how many calls the benchmark itself keeps waiting."""
    import random

    opened = [await client.open_session(["python"]) for _ in range(sessions)]
    code = {"code": "print(1)"}
    await asyncio.gather(*(s.call(ToolCall(id="warm", name="python", arguments=code)) for s in opened))
    idle = list(opened)
    latencies: list[float] = []
    errors = 0
    rng = random.Random(0)

    async def one(session: Any, index: int) -> None:
        nonlocal errors
        start = time.perf_counter()
        result = await session.call(ToolCall(id=f"p{index}", name="python", arguments=code))
        latencies.append(time.perf_counter() - start)
        errors += result.is_error or result.text.strip() != "1"
        idle.append(session)

    tasks = []
    start = time.perf_counter()
    next_at = start
    index = 0
    while next_at < start + seconds:
        await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
        if idle:  # with every session busy the arrival is dropped: the system is past saturation
            tasks.append(asyncio.create_task(one(idle.pop(rng.randrange(len(idle))), index)))
            index += 1
        next_at += rng.expovariate(rate_per_s)
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - start
    await asyncio.gather(*(s.close() for s in opened))
    return LoadResult(len(latencies), errors, elapsed, latencies)


async def _forks(client: ToolClient, count: int) -> dict[str, float]:
    session = await client.open_session(["python", "bash", "create_file"])
    await session.call(ToolCall(id="s1", name="python", arguments={"code": "import json\ndata = list(range(10000))"}))
    await session.call(ToolCall(id="s2", name="bash", arguments={"command": "mkdir -p src && cd src && export X=1"}))
    for i in range(20):
        await session.call(
            ToolCall(id=f"f{i}", name="create_file", arguments={"path": f"src/m{i}.py", "content": "x = 1\n" * 200})
        )
    latencies = []
    for _ in range(count):
        start = time.perf_counter()
        fork = await session.fork()
        latencies.append(time.perf_counter() - start)
        check = await fork.call(ToolCall(id="c", name="python", arguments={"code": "len(data)"}))
        assert check.text == "Out: 10000", check
        await fork.close()
    await session.close()
    ordered = sorted(latencies)
    return {
        "forks": count,
        "p50_ms": round(1000 * statistics.median(ordered), 2),
        "p99_ms": round(1000 * ordered[min(count - 1, int(0.99 * count))], 2),
    }


def _start_server(port: int) -> subprocess.Popen:
    specs = ["code", "terminal", "files", f"{__name__}:FreshProcessPython"]
    code = (
        "from agentrl.registry import TOOLSETS; from agentrl.toolserver.app import serve\n"
        f"serve([TOOLSETS.get(s, s) for s in {specs!r}], port={port}, log_level='warning')"
    )
    return start_server([sys.executable, "-c", code], port, timeout_s=30)


async def run_benchmark(
    sessions: int = 32, seconds: float = 10.0, forks: int = 50, rate_per_s: float = 150.0
) -> dict[str, Any]:
    port = free_port()
    server = _start_server(port)
    try:
        async with ToolClient(f"http://127.0.0.1:{port}", timeout_s=120.0) as client:
            single = (await _load(client, "python", 1, seconds / 2)).summary()
            paced = (await _paced(client, sessions, rate_per_s, seconds)).summary()
            persistent = (await _load(client, "python", sessions, seconds)).summary()
            baseline = (await _load(client, "python_once", sessions, seconds)).summary()
            fork = await _forks(client, forks)
    finally:
        server.terminate()
        server.wait(timeout=30)
    speedup = round(persistent["calls_per_s"] / max(baseline["calls_per_s"], 1e-9), 1)
    return {
        "benchmark": "tools",
        "cpus": os.cpu_count(),
        "sessions": sessions,
        "seconds_per_phase": seconds,
        "one_session": single,
        "at_target_rate": {"offered_calls_per_s": rate_per_s, **paced},
        "persistent_interpreter": persistent,
        "fresh_process_baseline": baseline,
        "speedup_vs_baseline": speedup,
        "fork": fork,
        "targets": TARGETS,
        "targets_met": {
            "p50_ms": paced["p50_ms"] <= TARGETS["p50_ms"],
            "calls_per_s": persistent["calls_per_s"] >= TARGETS["calls_per_s"],
            "speedup_vs_baseline": speedup >= TARGETS["speedup_vs_baseline"],
            "fork_p50_ms": fork["p50_ms"] <= TARGETS["fork_p50_ms"],
        },
    }
