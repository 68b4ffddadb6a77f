"""`SamplingGate`: requests sample while no weight update runs, and an update waits until none samples.

A readers–writer gate on the server's event loop. Every sampling request (`/v1/chat/completions`,
`/v1/completions`) holds it as a reader from the moment it is admitted until its answer is complete; a weight update
takes it as the writer: from then on new requests wait, the update waits for the requests already sampling to
finish, applies, and lets the waiting requests in. So every request is sampled start to finish by one set of weights
(its KV cache included), never partly by the old and partly by the new. The writer has priority, so a busy server
cannot postpone an update forever; the update's wait is bounded by the longest request in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class SamplingGate:
    """Many samplers or one updater at a time; a waiting updater blocks new samplers."""

    def __init__(self) -> None:
        self._condition: asyncio.Condition | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sampling = 0
        self._updating = False

    def _current(self) -> asyncio.Condition:
        """The condition of the running loop (a service may be served by one loop after another, as in tests)."""
        loop = asyncio.get_running_loop()
        if self._condition is None or self._loop is not loop:
            self._condition, self._loop = asyncio.Condition(), loop
        return self._condition

    @property
    def in_flight(self) -> int:
        """Requests sampling now."""
        return self._sampling

    @property
    def updating(self) -> bool:
        """An update holds the gate or waits for it: new requests wait."""
        return self._updating

    @contextlib.asynccontextmanager
    async def sampling(self) -> AsyncIterator[None]:
        condition = self._current()
        async with condition:
            await condition.wait_for(lambda: not self._updating)
            self._sampling += 1
        try:
            yield
        finally:
            async with condition:
                self._sampling -= 1
                condition.notify_all()

    @contextlib.asynccontextmanager
    async def update(self) -> AsyncIterator[None]:
        condition = self._current()
        async with condition:
            await condition.wait_for(lambda: not self._updating)  # one update at a time
            self._updating = True
            try:
                await condition.wait_for(lambda: self._sampling == 0)
            except BaseException:  # the updater gave up (its client went away): let the samplers in again
                self._updating = False
                condition.notify_all()
                raise
        try:
            yield
        finally:
            async with condition:
                self._updating = False
                condition.notify_all()
