"""The per-trajectory clock of `rollout.trajectory_timeout_s`: run one episode under it, and stop it meanwhile.

Each trajectory (root or fork) runs under its own deadline. Partial rollouts park a trajectory at its next policy
call when a step has enough complete groups, and it waits there until the next step; that wait is the trainer's,
not the trajectory's, so `clock_stopped` takes it off the trajectory's clock. The deadline travels in a context
variable: the episode runs in the task that awaits `play_one`, so every policy call it makes sees its own clock.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar

from agentrl.types import Trajectory

_deadline: ContextVar[asyncio.Timeout | None] = ContextVar("trajectory_deadline", default=None)


async def play_one(
    episode: Awaitable[Trajectory], timeout_s: float, fail: Callable[[BaseException], Trajectory]
) -> Trajectory:
    """Await one episode with at most `timeout_s` seconds on its clock (0: no limit); a crash or an overrun
    becomes `fail(error)`, an infrastructure failure of this trajectory only. The episode runs in the caller's
    task, so the cancellation that ends an overrun unwinds it there and its tool session is closed before this
    returns."""
    try:
        async with asyncio.timeout(timeout_s if timeout_s > 0 else None) as limit:
            token = _deadline.set(limit)
            try:
                return await episode
            finally:
                _deadline.reset(token)
    except TimeoutError as e:
        if limit.expired():
            return fail(TimeoutError(f"the trajectory ran past rollout.trajectory_timeout_s={timeout_s:g}"))
        return fail(e)
    except Exception as e:  # a scaffold crash is an infrastructure failure of this trajectory only
        return fail(e)


@contextlib.contextmanager
def clock_stopped() -> Iterator[None]:
    """Inside, the current trajectory's clock stands still: its deadline moves on by the time spent here."""
    limit = _deadline.get()
    when = limit.when() if limit is not None else None
    if limit is None or when is None or limit.expired():
        yield
        return
    loop = asyncio.get_running_loop()
    left = when - loop.time()
    limit.reschedule(None)
    try:
        yield
    finally:
        limit.reschedule(loop.time() + max(left, 0.0))
