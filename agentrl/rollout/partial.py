"""Partial rollouts (APRIL): over-provision groups, stop when enough are complete, carry the rest to the next step.

Each step starts the groups carried from earlier steps plus new ones, `groups_per_step + extra_groups` in all,
and returns as soon as `groups_per_step` groups are complete (the long tail no longer sets the step's length).
The unfinished groups are not aborted: their trajectories are parked at their next policy call (a gate in front
of the policy; a turn being sampled and the tool calls after it finish first), and they simply go on at the
next step, with the new weights. Their earlier turns keep the ids and sampler log-probabilities they were
sampled with, so the learner's truncated importance weights (`trainer.tis_cap`) correct for the older policy,
and each trajectory keeps the policy version it started with. A group started more than
`max_staleness_steps` weight updates ago is dropped (its sessions closed), never trained on.

Deviation from APRIL (Zhou et al. 2025, slime `sglang_example.py`): there, in-flight requests are aborted and
resumed from `prompt + partial response` with a reduced token budget; here the turn in flight finishes and the
episode resumes at its next turn boundary, so no turn mixes two policies' tokens.

Resume. In-flight trajectories cannot outlive their process (their tool sessions, sandboxes and sampler requests
die with it), so a checkpoint stores what can be carried: for each carried group its task id, the step that
started it and its policy version (`carry_state`, saved next to the weights by `agentrl/train/checkpoint.py`). A
resumed run re-issues those tasks before drawing new ones (`restore`): each group restarts from its prompt under
its original step, so its group and trajectory ids and sampling seeds are those the lost group had, with the
current weights and policy version (its earlier turns are gone, so it is on-policy again). The staleness bound
is applied to the stored version at the first step, exactly as the uninterrupted run would have dropped it, so
the resumed run schedules the same tasks and draws the same number of new ones. Groups that were complete but
beyond the step's quota are re-run too: their trajectories are not checkpointed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentrl.rollout.branching import BranchRule
from agentrl.rollout.collect import Slots, collect_groups
from agentrl.rollout.episode_clock import clock_stopped
from agentrl.types import Completion, Task, Trajectory, TrajectoryGroup

logger = logging.getLogger(__name__)


class PolicyGate:
    """The policy behind a gate: while closed, calls to `generate` wait (and are counted as parked)."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy
        self.open = asyncio.Event()
        self.open.set()
        self.parked = 0

    @property
    def tokenizer(self) -> Any:
        return self.policy.tokenizer

    @property
    def version(self) -> int:
        return getattr(self.policy, "version", 0)

    def __getattr__(self, name: str) -> Any:  # stats, score_continuations, ... of the wrapped policy
        return getattr(self.policy, name)

    async def generate(self, prompt_ids: Sequence[int], params: Any) -> Completion:
        if not self.open.is_set():
            self.parked += 1
            try:
                with clock_stopped():  # a parked trajectory waits for the trainer, not for itself
                    await self.open.wait()
            finally:
                self.parked -= 1
        return await self.policy.generate(prompt_ids, params)


@dataclass
class _Carried:
    """A carried group as a checkpoint keeps it: no trajectories, only what it takes to issue it again."""

    task: Task
    step: int
    """The step that started the group (its ids and seeds)."""
    version: int
    """The policy version its trajectories started under."""


@dataclass
class _GroupJob(_Carried):
    future: asyncio.Future = field(init=False)
    finished: int = 0
    """Its trajectories that have ended so far."""


@dataclass
class PartialStats:
    """What the last `collect` did."""

    carried_groups: int = 0
    """Groups finished this step that had been started in an earlier one."""
    dropped_stale_groups: int = 0
    """Groups dropped for exceeding the staleness bound."""
    off_policy_trajectories: int = 0
    """Returned trajectories started under older weights."""
    unfinished_groups: int = 0
    """Groups carried into the next step."""
    restarted_groups: int = 0
    """Groups carried at the checkpoint this run resumed from, started again from their tasks."""


class PartialRollouts:
    """APRIL across training steps; one instance lives as long as the run (and its event loop)."""

    @classmethod
    def for_run(cls, rollout: Any, scaffold: Any, policy: Any, tools: Any, *, seed: int) -> PartialRollouts | None:
        """Partial rollouts as `rollout` (a `RolloutConfig`) configures them; None when it asks for none."""
        if rollout.extra_groups_per_step <= 0:
            return None
        return cls(
            scaffold,
            policy,
            tools,
            samples_per_prompt=rollout.samples_per_prompt,
            groups_per_step=rollout.prompts_per_step,
            extra_groups=rollout.extra_groups_per_step,
            max_staleness_steps=rollout.max_staleness_steps,
            seed=seed,
            max_concurrent=rollout.max_concurrent_trajectories,
            branching=rollout.branch_rule,
            timeout_s=rollout.trajectory_timeout_s,
        )

    def __init__(
        self,
        scaffold: Any,
        policy: Any,
        tools: Any,
        *,
        samples_per_prompt: int,
        groups_per_step: int,
        extra_groups: int,
        max_staleness_steps: int = 1,
        seed: int = 0,
        max_concurrent: int = 256,
        branching: BranchRule | None = None,
        timeout_s: float = 0.0,
    ) -> None:
        self.scaffold, self.tools, self.gate = scaffold, tools, PolicyGate(policy)
        self.samples_per_prompt, self.groups_per_step, self.extra_groups = (
            samples_per_prompt,
            groups_per_step,
            extra_groups,
        )
        self.max_staleness_steps, self.seed, self.branching = max_staleness_steps, seed, branching
        self.max_concurrent, self.timeout_s = max_concurrent, timeout_s
        self._slots: Slots | None = None
        self.carried: list[_GroupJob] = []
        self.restored: list[_Carried] = []
        """Carried groups read from a checkpoint, re-issued (if not stale) at the next `collect`."""
        self.stats = PartialStats()
        self.progress: Any = None

    async def collect(
        self, step: int, new_tasks: Callable[[int], Sequence[Task]], *, progress: Any = None
    ) -> list[TrajectoryGroup]:
        """Return `groups_per_step` complete groups (carried ones first when complete); `new_tasks(n)` gives n
        fresh tasks to top the pool up with. `progress` (see `collect_groups`) is told how many trajectories of
        the pool have yet to end, then of each one as it ends."""
        if self._slots is None:
            self._slots = Slots(self.max_concurrent)
        version = self.gate.version
        self.stats = PartialStats()
        self.progress = progress
        jobs = await self._drop_stale(version)
        jobs += self._reissue(version)
        wanted = max(0, self.groups_per_step + self.extra_groups - len(jobs))
        jobs += [self._start(task, step, version) for task in new_tasks(wanted)]
        if progress is not None:
            slots = self._slots
            progress.expect(sum(self._group_size - job.finished for job in jobs), in_flight=lambda: slots.live)
        self.gate.open.set()
        ready = [job for job in jobs if job.future.done()]
        pending = {job.future: job for job in jobs if not job.future.done()}
        while len(ready) < self.groups_per_step and pending:
            done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            ready += [pending.pop(future) for future in done]
        taken, left = ready[: self.groups_per_step], ready[self.groups_per_step :]
        await self._park()
        self.carried = left + list(pending.values())
        groups = [group for job in taken for group in job.future.result()]
        self.stats.carried_groups = sum(job.step < step for job in taken)
        self.stats.unfinished_groups = len(pending)
        self.stats.off_policy_trajectories = sum(t.policy_version < version for g in groups for t in g.trajectories)
        return groups

    def carry_state(self) -> list[dict[str, Any]]:
        """The carried groups as checkpoint data (see the module docstring): task id, start step, policy version."""
        return [
            {"task_id": job.task.id, "step": job.step, "policy_version": job.version}
            for job in [*self.carried, *self.restored]
        ]

    def restore(self, carried: Sequence[Mapping[str, Any]], tasks: Mapping[str, Task]) -> None:
        """Queue the carried groups of a checkpoint (`carry_state`) to be re-issued first at the next `collect`;
        `tasks` maps task ids to the run's tasks. An id the run no longer has is logged and skipped."""
        self.restored = []
        for entry in carried:
            task = tasks.get(entry["task_id"])
            if task is None:
                logger.warning("carried task %r is not among this run's tasks: not re-issued", entry["task_id"])
                continue
            self.restored.append(_Carried(task, int(entry["step"]), int(entry["policy_version"])))

    async def aclose(self) -> None:
        """Drop every carried group (their sessions close)."""
        self.gate.open.set()
        for job in self.carried:
            job.future.cancel()
        await asyncio.gather(*(job.future for job in self.carried), return_exceptions=True)
        self.carried = []

    @property
    def _group_size(self) -> int:
        return self.branching.rollouts_per_task if self.branching is not None else self.samples_per_prompt

    def _start(self, task: Task, step: int, version: int) -> _GroupJob:
        job = _GroupJob(task, step, version)

        def finished(trajectory: Trajectory) -> None:
            job.finished += 1
            if self.progress is not None:
                self.progress.done(trajectory)

        coro = collect_groups(
            self.scaffold,
            [task],
            self.gate,
            self.tools,
            samples_per_prompt=self.samples_per_prompt,
            step=step,
            seed=self.seed,
            branching=self.branching,
            slots=self._slots,
            on_done=finished,
            timeout_s=self.timeout_s,
        )
        job.future = asyncio.ensure_future(coro)
        return job

    def _reissue(self, version: int) -> list[_GroupJob]:
        """Start the groups restored from a checkpoint that the staleness bound keeps (module docstring)."""
        keep = [group for group in self.restored if version - group.version <= self.max_staleness_steps]
        self.stats.dropped_stale_groups += len(self.restored) - len(keep)
        self.stats.restarted_groups = len(keep)
        self.restored = []
        return [self._start(group.task, group.step, version) for group in keep]

    async def _drop_stale(self, version: int) -> list[_GroupJob]:
        keep, stale = [], []
        for job in self.carried:
            (stale if version - job.version > self.max_staleness_steps else keep).append(job)
        for job in stale:
            job.future.cancel()
        await asyncio.gather(*(job.future for job in stale), return_exceptions=True)
        self.stats.dropped_stale_groups = len(stale)
        return keep

    async def _park(self) -> None:
        """Close the gate and wait until every trajectory in flight waits at it (or has finished)."""
        self.gate.open.clear()
        assert self._slots is not None
        while self._slots.live > self.gate.parked:
            await asyncio.sleep(0.002)
