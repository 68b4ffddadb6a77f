"""Collect trajectory groups: every trajectory is its own asyncio task.

No trajectory waits for another at turn boundaries: each one alternates policy calls and tool calls on its own,
and the policy backend batches whatever generation requests are live (continuous batching). A semaphore bounds
the trajectories in flight. A trajectory that raises, or runs past `rollout.trajectory_timeout_s`, is recorded
as an infrastructure failure of its group, never dropped silently and never scored as a zero reward. Each
finished trajectory is reported once to `on_done` and to the `progress` hook (`agentrl/runlog/progress.py`).

With a `BranchRule` (ARPO/AEPO, `agentrl/rollout/branching.py`) a task's k trajectories are m rollouts started from
the prompt plus forks: after each tool round a rollout may fork up to b − 1 times, with the probability the rule
gives for its entropy rise; a fork copies the token prefix and forks the tool-server session, so the branch
continues from the same tool state. When all of a task's rollouts have finished with slots left, one fresh
rollout starts from the prompt, until exactly k exist. There are no rounds: each rollout's tool rounds are its
own, and AEPO's consecutive-branch counter advances with the task's tool rounds in the order they happen.
"""

from __future__ import annotations

import asyncio
import inspect
import random
import zlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from agentrl.rollout.branching import (
    BranchDecision,
    BranchRule,
    BranchState,
    TaskBudget,
    forks,
    initial_rollouts,
    segment_entropy,
)
from agentrl.rollout.episode_clock import play_one
from agentrl.types import StopReason, Task, Trajectory, TrajectoryGroup


class Slots:
    """Bounds the trajectories in flight (`async with slots:` around each) and counts those inside."""

    def __init__(self, max_concurrent: int) -> None:
        self._semaphore = asyncio.Semaphore(max_concurrent)
        self.live = 0

    async def __aenter__(self) -> None:
        await self._semaphore.acquire()
        self.live += 1

    async def __aexit__(self, *exc: object) -> None:
        self.live -= 1
        self._semaphore.release()


def trajectory_seed(seed: int, step: int, task_id: str, sample: int) -> int:
    """A stable per-trajectory seed, so a resumed run draws the same samples as an uninterrupted one."""
    return zlib.crc32(f"{seed}/{step}/{task_id}/{sample}".encode())


def infra_failure(
    task: Task, group_id: str, trajectory_id: str, error: BaseException, policy: Any, parent_id: str | None = None
) -> Trajectory:
    return Trajectory(
        task_id=task.id,
        group_id=group_id,
        trajectory_id=trajectory_id,
        prompt_ids=(),
        turns=(),
        stop_reason=StopReason.INFRA_ERROR,
        error=f"{type(error).__name__}: {error}",
        policy_version=getattr(policy, "version", 0),
        parent_id=parent_id,
    )


async def collect_groups(
    scaffold: Any,
    tasks: Sequence[Task],
    policy: Any,
    tools: Any,
    *,
    samples_per_prompt: int,
    step: int,
    seed: int,
    max_concurrent: int = 256,
    on_done: Callable[[Trajectory], None] | None = None,
    branching: BranchRule | None = None,
    slots: Slots | None = None,
    timeout_s: float = 0.0,
    progress: Any = None,
) -> list[TrajectoryGroup]:
    """Run `samples_per_prompt` trajectories of every task; return one group per task, in task order.
    `slots` (shared by several calls) replaces the bound of `max_concurrent` trajectories in flight; a trajectory
    (each rollout and each fork, on its own clock from when it gets a slot) still running `timeout_s` after it
    started (0: no limit) is cancelled and becomes an infrastructure failure. `progress` (an object with
    `expect(n, in_flight=...)` and `done(trajectory)`, such as `agentrl.runlog.progress.RolloutProgress`) is told
    how many trajectories there will be, then of each one once as it ends."""
    gate = slots if slots is not None else Slots(max_concurrent)

    def report(trajectory: Trajectory) -> None:
        if on_done is not None:
            on_done(trajectory)
        if progress is not None:
            progress.done(trajectory)

    if progress is not None:
        per_task = branching.rollouts_per_task if branching is not None else samples_per_prompt
        progress.expect(len(tasks) * per_task, in_flight=lambda: gate.live)
    if branching is not None:
        collector = BranchingCollector(
            scaffold, policy, tools, branching, step=step, seed=seed, gate=gate, on_done=report, timeout_s=timeout_s
        )
        return list(await asyncio.gather(*(collector.group(task) for task in tasks)))

    async def one(task: Task, sample: int) -> Trajectory:
        group_id = f"s{step}/{task.id}"
        trajectory_id = f"{group_id}/{sample}"
        async with gate:
            run = scaffold.run(
                task,
                policy,
                tools,
                group_id=group_id,
                trajectory_id=trajectory_id,
                seed=trajectory_seed(seed, step, task.id, sample),
            )
            trajectory = await play_one(
                run, timeout_s, lambda e: infra_failure(task, group_id, trajectory_id, e, policy)
            )
        report(trajectory)
        return trajectory

    jobs = [[asyncio.ensure_future(one(task, i)) for i in range(samples_per_prompt)] for task in tasks]
    try:
        return [
            TrajectoryGroup(task, tuple(await asyncio.gather(*group))) for task, group in zip(tasks, jobs, strict=False)
        ]
    except asyncio.CancelledError:
        for job in (job for group in jobs for job in group):
            job.cancel()
        raise


class BranchingCollector:
    """ARPO/AEPO rollouts of one batch. Every entropy baseline and counter lives in `self.state`, which a new
    collector starts empty (the per-batch reset).

    Timeouts and cancellation. Every rollout, root or fork, is a trajectory on its own `timeout_s` clock from
    when it gets a slot (as in the plain path: time spent waiting for a slot is not its own); an overrun is an
    infrastructure failure of that rollout alone, and its branches go on, each in its own forked session. A
    fork under way when its parent is cancelled is completed and its branch launched before the cancellation
    proceeds, so every slot reserved in the task's budget ends as a trajectory and every forked session has an
    episode that closes it. An abandoned group (its task cancelled) cancels its rollouts and waits until they
    have unwound; a branch that never got a slot is started and cancelled at once, which closes its session.
    """

    def __init__(
        self,
        scaffold: Any,
        policy: Any,
        tools: Any,
        rule: BranchRule,
        *,
        step: int,
        seed: int,
        gate: Any,
        on_done: Callable[[Trajectory], None] | None = None,
        timeout_s: float = 0.0,
    ) -> None:
        self.scaffold, self.policy, self.tools, self.rule = scaffold, policy, tools, rule
        self.step, self.seed, self.gate, self.timeout_s = step, seed, gate, timeout_s
        tokenizer = getattr(policy, "tokenizer", None)
        self.vocab_size = len(tokenizer) if tokenizer is not None else None
        self.state = BranchState()
        self.on_done = on_done

    async def group(self, task: Task) -> TrajectoryGroup:
        rule = self.rule
        budget = TaskBudget(k=rule.rollouts_per_task, m=1 if rule.dynamic_initial else rule.initial_rollouts)
        self.state.budgets[task.id] = budget
        group_id = f"s{self.step}/{task.id}"
        finished: dict[int, Trajectory] = {}
        jobs = _Jobs()
        complete = asyncio.get_running_loop().create_future()

        def launch(index: int, episode: Awaitable[Trajectory], parent_id: str | None = None) -> None:
            jobs.start(
                episode,
                parent_id is not None,
                lambda: self._play(task, group_id, index, episode, parent_id),
                lambda job: settle(index, job),
            )

        def start_fresh(monitor: bool = False) -> None:
            index = budget.started
            budget.started += 1
            budget.active += 1
            episode = self.scaffold.run(
                task,
                self.policy,
                self.tools,
                group_id=group_id,
                trajectory_id=f"{group_id}/{index}",
                seed=trajectory_seed(self.seed, self.step, task.id, index),
                on_tool_round=None if monitor else on_tool_round,  # AEPO's monitor rollout never forks
            )
            launch(index, episode)

        def settle(index: int, job: asyncio.Future) -> None:
            if not jobs.settled(job):
                return
            finished[index] = job.result()
            budget.active -= 1
            if rule.dynamic_initial and index == 0:
                budget.m = self._premonitor(finished[0])
                for _ in range(min(budget.m - 1, budget.slots_left)):
                    start_fresh()
            if budget.active == 0:
                if budget.slots_left > 0:
                    start_fresh()
                elif not complete.done():
                    complete.set_result(None)

        async def on_tool_round(point: Any) -> None:
            await self._maybe_fork(task, budget, point, launch, on_tool_round)

        for _ in range(budget.m):
            start_fresh(monitor=rule.dynamic_initial)
        try:
            await complete
        except asyncio.CancelledError:  # the group is abandoned: so are its rollouts (their sessions close)
            await jobs.abandon()
            raise
        return TrajectoryGroup(task, tuple(finished[i] for i in sorted(finished)))

    async def _play(
        self, task: Task, group_id: str, index: int, episode: Awaitable[Trajectory], parent_id: str | None
    ) -> Trajectory:
        trajectory_id = f"{group_id}/{index}"
        async with self.gate:
            trajectory = await play_one(
                episode,
                self.timeout_s,
                lambda e: infra_failure(task, group_id, trajectory_id, e, self.policy, parent_id),
            )
        if self.on_done is not None:
            self.on_done(trajectory)
        return trajectory

    async def _maybe_fork(
        self,
        task: Task,
        budget: TaskBudget,
        point: Any,
        launch: Callable[[int, Awaitable[Trajectory], str | None], None],
        on_tool_round: Callable[[Any], Awaitable[None]],
    ) -> None:
        """A rollout's tool round: up to b − 1 fork tests on its entropy rise, within the task's budget."""
        rule = self.rule
        turn = point.turns[-1]
        h_now = segment_entropy(turn.entropies, rule.entropy_tokens, self.vocab_size)
        delta_h = self.state.delta_h(point.trajectory_id, h_now)
        forked = False
        for attempt in range(rule.beam_size - 1):
            if budget.slots_left <= 0:
                break
            draw = random.Random(f"{self.seed}/{self.step}/{point.trajectory_id}/{len(point.turns)}/{attempt}")
            u = draw.random()
            decision = forks(rule, u, delta_h, budget.consecutive)
            self.state.decisions.append(
                BranchDecision(
                    task.id, point.trajectory_id, len(point.turns), attempt, u, delta_h, budget.consecutive, decision
                )
            )
            if not decision:
                continue
            child = budget.started
            budget.started += 1  # reserved before the fork's await, so concurrent rounds never overshoot k
            budget.active += 1
            fork = asyncio.ensure_future(
                point.fork(
                    trajectory_id=f"s{self.step}/{task.id}/{child}",
                    seed=trajectory_seed(self.seed, self.step, task.id, child),
                    on_tool_round=on_tool_round,
                )
            )
            try:
                await asyncio.shield(fork)
            except asyncio.CancelledError:  # this rollout timed out or was abandoned mid-fork: see the class doc
                await asyncio.wait([fork])
                launch(child, _branch(fork), point.trajectory_id)
                raise
            except Exception:  # the session could not be forked: the slot becomes an infrastructure failure
                pass
            launch(child, _branch(fork), point.trajectory_id)
            forked = forked or (not fork.cancelled() and fork.exception() is None)
        budget.consecutive = budget.consecutive + 1 if forked else 0

    def _premonitor(self, first: Trajectory) -> int:
        """AEPO: m from the first rollout's root entropy and its mean entropy after tool results."""
        rule = self.rule
        if not first.turns:
            return rule.initial_rollouts
        segments = [segment_entropy(t.entropies, rule.entropy_tokens, self.vocab_size) for t in first.turns]
        h_root = segments[0]
        h_tool = sum(segments[1:]) / len(segments[1:]) if len(segments) > 1 else h_root
        return initial_rollouts(rule.rollouts_per_task, h_root, h_tool, beta=rule.premonitor_beta)


class _Jobs:
    """One group's rollout tasks, each with the episode it plays, and the discards an abandoned group leaves."""

    def __init__(self) -> None:
        self.running: dict[asyncio.Future, tuple[Awaitable[Trajectory], bool]] = {}  # job → (episode, is a fork)
        self.cleanup: list[asyncio.Future] = []
        self.abandoned = False

    def start(
        self,
        episode: Awaitable[Trajectory],
        is_fork: bool,
        play: Callable[[], Awaitable[Trajectory]],
        settle: Callable[[asyncio.Future], None],
    ) -> None:
        """Run `play()` (which plays `episode`) as a task; once the group is abandoned, discard `episode` instead
        (a fork that completed after its parent was cancelled)."""
        if self.abandoned:
            self.cleanup.append(asyncio.ensure_future(_discard(episode, is_fork)))
            return
        job = asyncio.ensure_future(play())
        self.running[job] = (episode, is_fork)
        job.add_done_callback(settle)

    def settled(self, job: asyncio.Future) -> bool:
        """Forget a finished job; whether its trajectory counts (not when cancelled or the group abandoned)."""
        episode, is_fork = self.running.pop(job)
        if job.cancelled():
            if _unstarted(episode):  # cancelled while waiting for a slot
                self.cleanup.append(asyncio.ensure_future(_discard(episode, is_fork)))
            return False
        return not self.abandoned

    async def abandon(self) -> None:
        """Cancel every job and wait until all have unwound and every never-started episode is discarded."""
        self.abandoned = True
        for job in list(self.running):
            job.cancel()
        while self.running:
            await asyncio.wait(list(self.running))
        await asyncio.gather(*self.cleanup, return_exceptions=True)


def _branch(fork: asyncio.Future) -> Awaitable[Trajectory]:
    """The branch episode of a finished fork, or one that fails with the fork's error."""
    if fork.cancelled():
        return _raise(RuntimeError("the session fork was cancelled"))
    error = fork.exception()
    return _raise(error) if error is not None else fork.result()


def _unstarted(episode: Awaitable[Trajectory]) -> bool:
    return inspect.iscoroutine(episode) and inspect.getcoroutinestate(episode) == inspect.CORO_CREATED


async def _discard(episode: Awaitable[Trajectory], forked: bool) -> None:
    """End an episode that never started. A fresh one has opened nothing yet; a fork's episode already owns its
    forked tool session, which only the episode's own unwinding closes, so it is started and cancelled at its
    first suspension."""
    if not _unstarted(episode):
        return
    if not forked:
        episode.close()  # type: ignore[attr-defined]
        return
    job = asyncio.ensure_future(episode)
    await asyncio.sleep(0)
    job.cancel()
    await asyncio.gather(job, return_exceptions=True)


async def _raise(error: BaseException) -> Trajectory:
    raise error
