"""`RayRollouts`: the trainer's rollouts played by rollout-worker actors on a Ray cluster.

It starts the run's actors (`ray.tool_servers` tool servers spread over the nodes, `ray.rollout_workers` rollout
workers; `agentrl/distributed/`), and answers the trainer's `collect` as `LocalRollouts` does: one call per task,
the tasks dealt round-robin over the workers, the groups back in the tasks' order.

- A worker that dies mid-step loses the groups it was playing: each is re-issued to the next worker (Ray restarts
  the dead one, `ray.max_restarts`), up to `ray.reissue_attempts` tries, after which its trajectories end as
  infrastructure failures. A re-issued group is played from its prompt with the seeds the lost one had, so it
  samples what the lost one would have (metric `rollout/reissued_groups`).
- A tool server that dies ends the episodes whose sessions it held as infrastructure failures (the tool client
  raises; nothing is scored); Ray restarts it, and each `collect` hands the workers the servers' current addresses.
- Weights: `publish` puts the learner's weights in the object store once per version (all of them the first time,
  then the trainable ones: a LoRA run ships its adapters) and waits until every worker has loaded them. A worker
  restarted since catches up at its next `collect`, which names the version and the refs to load. With
  `policy.backend=openai` the trainer's own policy updates the servers, and workers only learn the version.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Sequence
from typing import Any

from agentrl.distributed.cluster import actor_options, connect, require_ray
from agentrl.types import Task, TrajectoryGroup


class RayRollouts:
    """The run's rollout workers and tool servers on Ray; `collect` and `publish` as the trainer calls them."""

    tools = None
    """No tool backend in this process: the workers hold theirs."""

    def __init__(self, config: Any, run_name: str, *, policy_factory: Any = None) -> None:
        """Start the actors of run `run_name`; `policy_factory(tokenizer)` (picklable), when given, makes each
        worker's sampler instead of `policy.backend`."""
        from agentrl.distributed.rollout_worker import RolloutWorker
        from agentrl.distributed.tool_server_actor import ToolServerActor

        ray = require_ray()
        self.config, self.ray_config = config, config.ray
        self.started_ray = connect(self.ray_config)
        self.token = config.tool_server_token or secrets.token_hex(16)
        cfg = self.ray_config
        tool_server = ray.remote(ToolServerActor)
        self.tool_servers = [
            tool_server.options(
                **actor_options(cfg, f"{run_name}/tools-{i}", cpus=cfg.tool_server_cpus), scheduling_strategy="SPREAD"
            ).remote(config, self.token)
            for i in range(cfg.tool_servers)
        ]
        urls = self._tool_urls()
        worker = ray.remote(RolloutWorker)
        self.workers = [
            worker.options(
                **actor_options(cfg, f"{run_name}/rollout-{i}", cpus=cfg.worker_cpus, gpus=cfg.worker_gpus)
            ).remote(config, urls, self.token if cfg.tool_servers else config.tool_server_token, policy_factory)
            for i in range(cfg.rollout_workers)
        ]
        ray.get([w.ready.remote() for w in self.workers])  # a worker that cannot start fails the run here
        self.version = 0
        self.weights: list[Any] = []
        """Refs to load, in order, to reach `version`: every weight once, then the latest trainable ones."""
        self.stats: dict[str, float] = {}
        self._ships_weights = config.policy.backend != "openai"

    async def collect(
        self, tasks: Sequence[Task], step: int, *, evaluation: bool = False, progress: Any = None
    ) -> list[TrajectoryGroup]:
        """One group per task, in the tasks' order, played by the workers (`step` -1 for evaluation)."""
        urls = await asyncio.to_thread(self._tool_urls)
        if progress is not None:
            per_task = self.config.eval.samples_per_task if evaluation else self._rollouts_per_task()
            progress.expect(len(tasks) * per_task)
        reissued = [0]
        groups = await asyncio.gather(
            *(self._group(i, task, step, evaluation, urls, reissued, progress) for i, task in enumerate(tasks))
        )
        if not evaluation:
            self.stats = {"rollout/reissued_groups": float(reissued[0])}
        return list(groups)

    def publish(self, model: Any, version: int) -> None:
        """Every worker holds the learner's weights of `version` when this returns."""
        ray = require_ray()
        if self._ships_weights:
            named = model.state_dict().items() if not self.weights else _trainable(model)
            ref = ray.put({name: tensor.detach().cpu() for name, tensor in named})
            self.weights = [*self.weights[:1], ref]  # the first (all weights) stays for restarted workers
        self.version = version
        loads = [w.load_weights.remote(version, self.weights) for w in self.workers]
        for load in loads:
            try:
                ray.get(load)
            except ray.exceptions.RayError:  # a dead worker catches up at its next collect, once restarted
                pass

    async def aclose(self) -> None:
        ray = require_ray()
        closing = [w.aclose.remote() for w in self.workers]
        await asyncio.gather(*(_quietly(ref) for ref in closing))
        for actor in [*self.workers, *self.tool_servers]:
            ray.kill(actor, no_restart=True)
        if self.started_ray:
            ray.shutdown()

    # --- plumbing --------------------------------------------------------------------------------------

    async def _group(
        self, index: int, task: Task, step: int, evaluation: bool, urls: list[str], reissued: list[int], progress: Any
    ) -> TrajectoryGroup:
        ray = require_ray()
        error: BaseException | None = None
        for attempt in range(self.ray_config.reissue_attempts):
            worker = self.workers[(index + attempt) % len(self.workers)]
            try:
                [group] = await worker.collect.remote([task], step, evaluation, self.version, self.weights, urls)
                break
            except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as lost:
                error = lost
                reissued[0] += 1
        else:
            group = self._failed(task, step, evaluation, error)
        if progress is not None:
            for trajectory in group.trajectories:
                progress.done(trajectory)
        return group

    def _failed(self, task: Task, step: int, evaluation: bool, error: BaseException | None) -> TrajectoryGroup:
        from agentrl.rollout.collect import infra_failure

        group_id = f"s{-1 if evaluation else step}/{task.id}"
        per_task = self.config.eval.samples_per_task if evaluation else self.config.rollout.samples_per_prompt
        cause = RuntimeError(f"no rollout worker could play the group: {error}")
        failed = (infra_failure(task, group_id, f"{group_id}/{k}", cause, self) for k in range(per_task))
        return TrajectoryGroup(task, tuple(failed))

    def _rollouts_per_task(self) -> int:
        rule = self.config.rollout.branch_rule
        return rule.rollouts_per_task if rule is not None else self.config.rollout.samples_per_prompt

    def _tool_urls(self) -> list[str]:
        """The tool servers' current addresses (a restarting server is waited for), else the run's `tool_servers`."""
        if not self.tool_servers:
            return list(self.config.tool_servers)
        ray = require_ray()
        return ray.get([server.url.remote() for server in self.tool_servers])


def _trainable(model: Any) -> list[tuple[str, Any]]:
    names = {name for name, p in model.named_parameters() if p.requires_grad}
    return [(name, tensor) for name, tensor in model.state_dict().items() if name in names]


async def _quietly(ref: Any) -> None:
    try:
        await ref
    except Exception:  # noqa: BLE001 - closing: a worker already gone has nothing left to close
        pass
