"""Scale-out on Ray: rollout workers and tool servers as Ray actors (`agentrl train --ray [ADDRESS]`).

- `config.py`: `RayConfig`, the `ray.*` fields of a run.
- `cluster.py`: joining (or starting) the Ray cluster, and the actor options every actor here is made with.
- `tool_server_actor.py`: `ToolServerActor`, an `agentrl serve-tools` server living in a Ray actor.
- `rollout_worker.py`: `RolloutWorker`, an actor that plays episodes with a sampler of its own.
- `ray_rollouts.py`: `RayRollouts`, the trainer's side: shares tasks out, re-issues the groups of a worker that
  died, and publishes the learner's weights to every worker through the object store.

The multi-process learner (`agentrl train --nproc N`) is `agentrl/train/distributed.py`: accelerate launches it,
torch.distributed carries its collectives.
"""
