"""`RequestMerger`: concurrent callers whose requests arrive within a short wait share one batched call.

    batcher = RequestMerger(score_rows, wait_s=0.002)      # score_rows(items: list) -> list, one result per item
    results = await batcher.submit(my_items)               # from any number of concurrent tasks

The batched function runs in a worker thread (it is a forward pass, say), so the event loop keeps serving. A
failed batch fails the requests in it, not later ones.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any


class RequestMerger:
    """Collects `submit`ted items for `wait_s`, then calls `fn` once on all of them and hands each caller its
    slice of the results."""

    def __init__(self, fn: Callable[[list[Any]], list[Any]], wait_s: float) -> None:
        self.fn = fn
        self.wait_s = wait_s
        self._pending: list[tuple[list[Any], asyncio.Future]] = []
        self._drain: asyncio.Task | None = None

    async def submit(self, items: Sequence[Any]) -> list[Any]:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._pending.append((list(items), future))
        if self._drain is None or self._drain.done() or self._drain.get_loop() is not loop:
            self._drain = loop.create_task(self._run())
        return await future

    async def _run(self) -> None:
        await asyncio.sleep(self.wait_s)  # let the other concurrent callers queue up
        while self._pending:
            pending, self._pending = self._pending, []
            items = [item for request, _ in pending for item in request]
            try:
                results = await asyncio.to_thread(self.fn, items)
            except Exception as e:
                for _, future in pending:
                    if not future.done():
                        future.set_exception(e)
                continue
            start = 0
            for request, future in pending:
                if not future.done():
                    future.set_result(results[start : start + len(request)])
                start += len(request)
