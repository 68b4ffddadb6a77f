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
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agentrl.branching import BranchRule
from agentrl.rollout import Slots, collect_groups
from agentrl.types import Completion, Task, TrajectoryGroup


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
                await self.open.wait()
            finally:
                self.parked -= 1
        return await self.policy.generate(prompt_ids, params)


@dataclass
class _GroupJob:
    task: Task
    step: int
    version: int
    future: asyncio.Future


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


class PartialRollouts:
    """APRIL across training steps; one instance lives as long as the run (and its event loop)."""

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
    ) -> None:
        self.scaffold, self.tools, self.gate = scaffold, tools, PolicyGate(policy)
        self.samples_per_prompt, self.groups_per_step, self.extra_groups = (
            samples_per_prompt,
            groups_per_step,
            extra_groups,
        )
        self.max_staleness_steps, self.seed, self.branching = max_staleness_steps, seed, branching
        self.max_concurrent = max_concurrent
        self._slots: Slots | None = None
        self.carried: list[_GroupJob] = []
        self.stats = PartialStats()

    async def collect(self, step: int, new_tasks: Callable[[int], Sequence[Task]]) -> list[TrajectoryGroup]:
        """Return `groups_per_step` complete groups (carried ones first when complete); `new_tasks(n)` gives n
        fresh tasks to top the pool up with."""
        if self._slots is None:
            self._slots = Slots(self.max_concurrent)
        version = self.gate.version
        self.stats = PartialStats()
        jobs = await self._drop_stale(version)
        jobs += [
            self._start(task, step, version) for task in new_tasks(self.groups_per_step + self.extra_groups - len(jobs))
        ]
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

    async def aclose(self) -> None:
        """Drop every carried group (their sessions close)."""
        self.gate.open.set()
        for job in self.carried:
            job.future.cancel()
        await asyncio.gather(*(job.future for job in self.carried), return_exceptions=True)
        self.carried = []

    def _start(self, task: Task, step: int, version: int) -> _GroupJob:
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
        )
        return _GroupJob(task, step, version, asyncio.ensure_future(coro))

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
