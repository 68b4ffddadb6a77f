"""Scale-out on Ray: rollout workers and tool servers as Ray actors (`agentrl train --ray [ADDRESS]`).

- `config.py`: `RayConfig`, the `ray.*` fields of a run.
- `cluster.py`: joining (or starting) the Ray cluster, and the actor options every actor here is made with.
- `tool_server_actor.py`: `ToolServerActor`, an `agentrl serve-tools` server living in a Ray actor.
- `rollout_worker.py`: `RolloutWorker`, an actor that plays episodes with a sampler of its own.
- `ray_rollouts.py`: `RayRollouts`, the trainer's side: shares tasks out, re-issues the groups of a worker that
  died, and publishes the learner's weights to every worker through the object store.
- `sharded_rollouts.py`: `ShardedRollouts`, a data-parallel rank's share of the groups (rank 0 holds the workers).
- `learner_actors.py`: the learner as Ray actors (`ray.learner_processes`), one data-parallel rank each.

The multi-process learner (`agentrl train --nproc N`) is `agentrl/train/distributed.py`: accelerate launches it,
torch.distributed carries its collectives.
"""
