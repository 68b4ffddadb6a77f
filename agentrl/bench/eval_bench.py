"""`agentrl bench eval`: `agentrl eval` throughput (tasks/min) against a local `agentrl serve`, by concurrency.

The server (`agentrl serve --model tiny`) runs in a process of its own, as a user would run it, and the same
held-out tasks are evaluated greedily at each concurrency level with both transports: `text` (token-id prompts
to /v1/completions, the training loop's format) and `native` (OpenAI tool calls over /v1/chat/completions).
Success rates are printed beside the throughput: they should not depend on the concurrency.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agentrl.bench.local_server import free_port, start_server


def _start_server(model: str, port: int) -> subprocess.Popen:
    command = [
        sys.executable,
        "-m",
        "agentrl.cli.app",
        "serve",
        "--model",
        model,
        "--port",
        str(port),
        "--device",
        "cpu",
    ]
    return start_server(command, port, timeout_s=120)


def run_benchmark(
    scaffold: str = "code", model: str = "tiny", tasks: int = 48, concurrency: tuple[int, ...] = (1, 8, 32)
) -> dict[str, Any]:
    from agentrl.config import EvalRunConfig
    from agentrl.eval.runner import evaluate

    port = free_port()
    server = _start_server(model, port)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as out:
            # Warm-up (imports, first forward passes, plotting) so the first measured level pays none of it.
            for fmt in ("text", "native"):
                warm = EvalRunConfig(
                    scaffold=scaffold,
                    model=model,
                    base_url=f"http://127.0.0.1:{port}/v1",
                    format=fmt,
                    max_tasks=2,
                    output=str(Path(out) / f"warm-{fmt}.jsonl"),
                )
                asyncio.run(evaluate(warm))
            for fmt in ("text", "native"):
                for level in concurrency:
                    config = EvalRunConfig(
                        scaffold=scaffold,
                        model=model,
                        base_url=f"http://127.0.0.1:{port}/v1",
                        format=fmt,
                        max_tasks=tasks,
                        max_concurrent_episodes=level,
                        output=str(Path(out) / f"{fmt}-{level}.jsonl"),
                    )
                    start = time.perf_counter()
                    outcome = asyncio.run(evaluate(config))
                    seconds = time.perf_counter() - start
                    done = len(outcome.records)
                    rows.append(
                        {
                            "format": fmt,
                            "concurrency": level,
                            "tasks": done,
                            "seconds": round(seconds, 1),
                            "tasks_per_min": round(60 * done / seconds, 1),
                            "success": outcome.summary["success"],  # over the episodes that ran; None if none did
                            "infra_errors": outcome.summary["infra_errors"],
                        }
                    )
    finally:
        server.terminate()
        server.wait(timeout=30)
    return {"benchmark": "eval", "scaffold": scaffold, "model": model, "cpus": os.cpu_count(), "runs": rows}


def format_table(result: dict[str, Any]) -> str:
    lines = [f"agentrl eval against agentrl serve --model {result['model']} ({result['scaffold']} tasks)"]
    lines.append(
        f"{'format':<8}{'concurrency':>12}{'tasks':>7}{'seconds':>9}{'tasks/min':>11}{'success':>9}{'infra':>7}"
    )
    for r in result["runs"]:
        success = "-" if r["success"] is None else f"{r['success']:.3f}"
        lines.append(
            f"{r['format']:<8}{r['concurrency']:>12}{r['tasks']:>7}{r['seconds']:>9}"
            f"{r['tasks_per_min']:>11}{success:>9}{r['infra_errors']:>7}"
        )
    return "\n".join(lines)
