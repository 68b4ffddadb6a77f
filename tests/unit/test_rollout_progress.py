"""The rollout progress hook: the engine reports every trajectory exactly once as it ends (answered, crashed or
timed out), and the training bar shows those counts live in a terminal and prints nothing elsewhere."""

from __future__ import annotations

import asyncio
import io
import time
from collections import Counter

import pytest

from agentrl.rollout.collect import collect_groups
from agentrl.runlog.progress import RolloutProgress, TrainProgress
from agentrl.types import StopReason, Task, Trajectory

pytestmark = pytest.mark.unit


class PlannedScaffold:
    """A user scaffold whose sample i does `task.metadata["plan"][i]`: `ok` (answer at once), `crash` (raise) or
    `hang` (sleep far past any timeout)."""

    async def run(self, task, policy, tools, *, group_id, trajectory_id, seed):
        plan = task.metadata["plan"][int(trajectory_id.rsplit("/", 1)[1])]
        if plan == "crash":
            raise ConnectionError("tool server went away")
        await asyncio.sleep(60.0 if plan == "hang" else 0.01)
        return Trajectory(
            task_id=task.id,
            group_id=group_id,
            trajectory_id=trajectory_id,
            prompt_ids=(1,),
            turns=(),
            stop_reason=StopReason.ANSWERED,
        )


def test_every_trajectory_is_reported_exactly_once_including_failures_and_timeouts() -> None:
    plan = ["ok", "crash", "hang", "ok"]
    tasks = [Task(id=f"t{i}", prompt="p", metadata={"plan": plan}) for i in range(3)]
    reported: list[Trajectory] = []
    seen_running: list[int] = []
    progress = RolloutProgress(lambda p: seen_running.append(p.running() if p.running else -1))

    async def collect():
        with progress:
            return await collect_groups(
                PlannedScaffold(),
                tasks,
                None,
                None,
                samples_per_prompt=len(plan),
                step=0,
                seed=0,
                max_concurrent=5,
                timeout_s=0.3,
                on_done=reported.append,
                progress=progress,
            )

    groups = asyncio.run(asyncio.wait_for(collect(), 10))
    ids = [t.trajectory_id for g in groups for t in g.trajectories]
    assert Counter(t.trajectory_id for t in reported) == Counter(ids)  # each one once, none missing
    assert (progress.total, progress.finished, progress.failed) == (12, 12, 6)
    assert not progress.active  # the step's collection is over
    timed_out = [t for t in reported if t.error and "trajectory_timeout_s=0.3" in t.error]
    crashed = [t for t in reported if t.error and "ConnectionError" in t.error]
    assert len(timed_out) == 3 and len(crashed) == 3
    assert 0 < max(seen_running) <= 5  # the engine's own in-flight count, bounded by max_concurrent


def test_without_a_terminal_rollout_events_print_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    with TrainProgress(3) as progress:  # pytest captures stdout, so it is not a terminal
        with progress.rollouts as rollouts:
            rollouts.expect(2)
            for i in range(2):
                rollouts.done(_trajectory(i))
        progress.advance(1, {})
    assert capsys.readouterr().out == "step 1/3\n"  # the one line per step, nothing per trajectory
    assert (progress.rollouts.total, progress.rollouts.finished) == (2, 2)


def test_the_live_bar_shows_a_rollouts_row_while_a_step_collects() -> None:
    from rich.console import Console

    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=160)
    with TrainProgress(10, console=console) as progress:
        with progress.rollouts as rollouts:
            rollouts.expect(4, in_flight=lambda: 3)
            rollouts.done(_trajectory(0))
            rollouts.done(_trajectory(1, StopReason.INFRA_ERROR))
            deadline = time.monotonic() + 10
            while "2/4" not in buffer.getvalue() and time.monotonic() < deadline:
                time.sleep(0.05)  # the bar redraws on its own refresh thread
            text = buffer.getvalue()
        after = len(progress._progress.tasks)
    assert "rollouts" in text and "2/4" in text and "failed 1 running 3" in text
    assert after == 1  # the rollouts row goes away when the collection ends


def _trajectory(i: int, reason: StopReason = StopReason.ANSWERED) -> Trajectory:
    return Trajectory(
        task_id="t", group_id="s1/t", trajectory_id=f"s1/t/{i}", prompt_ids=(1,), turns=(), stop_reason=reason
    )
