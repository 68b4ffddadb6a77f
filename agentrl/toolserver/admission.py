"""`Admission`: a bounded number of running calls per toolset, a bounded queue behind it, and refusal beyond.

Model-written code arrives in bursts (a whole batch of rollouts reaches its tool call at once). Running every
call at once thrashes the CPU and memory; an unbounded queue hides overload until requests time out. So each
toolset runs at most `max_running` calls, at most `max_waiting` wait (how long is measured), and the next one
is refused at once with `Overloaded`, which the server turns into HTTP 503 and the client retries with backoff.
"""

from __future__ import annotations

import asyncio
import time

from agentrl.errors import InfraError


class Overloaded(InfraError):
    """The queue of this toolset is full: try again later."""


class Admission:
    """One gate per key (toolset label). `admit` decides at once (raising `Overloaded`); the ticket it returns
    waits for a running slot: `async with admission.admit(key) as ticket: ticket.waited_s`."""

    def __init__(self, max_running: int, max_waiting: int, *, caps: dict[str, int] | None = None) -> None:
        self.max_running = max_running
        self.max_waiting = max_waiting
        self.caps = dict(caps or {})
        self._gates: dict[str, asyncio.Semaphore] = {}
        self.admitted: dict[str, int] = {}
        """Calls running or waiting, per key."""

    def admit(self, key: str) -> _Ticket:
        cap = self.caps.get(key, self.max_running)
        gate = self._gates.get(key)
        if gate is None:
            gate = self._gates[key] = asyncio.Semaphore(cap)
        if self.admitted.get(key, 0) >= cap + self.max_waiting:
            raise Overloaded(f"{key}: {cap} calls running and {self.max_waiting} waiting")
        self.admitted[key] = self.admitted.get(key, 0) + 1
        return _Ticket(self, key, gate)

    def _leave(self, key: str) -> None:
        self.admitted[key] -= 1


class _Ticket:
    """A place in one toolset's queue; entering waits for a running slot, leaving frees both."""

    def __init__(self, admission: Admission, key: str, gate: asyncio.Semaphore) -> None:
        self._admission, self._key, self._gate = admission, key, gate
        self._queued_at = time.perf_counter()
        self._held = True
        self.waited_s = 0.0

    async def __aenter__(self) -> _Ticket:
        await self._gate.acquire()
        self.waited_s = time.perf_counter() - self._queued_at
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._gate.release()
        self.cancel()

    def cancel(self) -> None:
        """Give the place up (idempotent; also covers a call cancelled before it started)."""
        if self._held:
            self._held = False
            self._admission._leave(self._key)
