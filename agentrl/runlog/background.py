"""Running a blocking training run from code that already has an event loop (a notebook, an async program)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def run_blocking(run: Callable[[], T], stop: Callable[[], None]) -> T:
    """`run()`, here when no event loop runs in this thread; inside a running loop (Jupyter's) in a thread of its
    own while this call waits, since the run drives an event loop of its own. An interrupt calls `stop()` (the run
    ends after its current step), waits for the run, and is raised again."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return run()
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="agentrl-trainer") as worker:
        future = worker.submit(run)
        try:
            while True:
                with contextlib.suppress(concurrent.futures.TimeoutError):
                    return future.result(timeout=0.2)  # short waits, so an interrupt reaches this thread
        except KeyboardInterrupt:
            stop()
            future.result()
            raise


async def run_awaitable(run: Callable[[], T], stop: Callable[[], None]) -> T:
    """`run()` in a thread, awaited, so the caller's loop stays free; cancelling the await calls `stop()` and
    waits for the run to end before the cancellation goes on."""
    worker = asyncio.ensure_future(asyncio.to_thread(run))
    try:
        return await asyncio.shield(worker)
    except asyncio.CancelledError:
        stop()
        await asyncio.wait([worker])
        raise
