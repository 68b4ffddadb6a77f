"""The learner as a group of Ray actors (`ray.learner_processes=N`): where Ray places it, not where `agentrl train`
was started.

Each actor is one data-parallel rank of the usual trainer (`agentrl/train/distributed.py`): the actors agree on
a rendezvous (rank 0's node address and a free port there), set the variables a launcher would set (`RANK`,
`WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT`, `LOCAL_RANK`; Ray gives each actor its own GPUs through
`CUDA_VISIBLE_DEVICES`, so its device is 0), and build a `Trainer`, whose rank 0 holds the rollout workers as with
`--nproc`. `agentrl train` only starts them, waits, and stops them on an interrupt (each stops after its step,
checkpointed). The run directory is written by rank 0, on its node.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from agentrl.distributed.cluster import actor_options, connect, require_ray


class LearnerRank:
    """One rank of the learner: a `Trainer` in a Ray actor."""

    def __init__(self) -> None:
        self.trainer: Any = None

    def rendezvous(self) -> tuple[str, int]:
        """An address and free port of this actor's node, for rank 0 to host the process group on."""
        import ray

        host = ray.util.get_node_ip_address()
        with socket.socket() as probe:
            probe.bind((host, 0))
            return host, probe.getsockname()[1]

    def setup(self, config: Any, run_dir: str | None, resume: bool, rank: int, world: int, master: tuple) -> str:
        """Join the process group and build the trainer (every rank at once); the run directory."""
        os.environ.update(
            RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK="0", MASTER_ADDR=master[0], MASTER_PORT=str(master[1])
        )
        from agentrl.trainer import Trainer

        self.trainer = Trainer(config, run_dir, resume=resume)
        return str(self.trainer.run_dir)

    def run(self) -> dict[str, float]:
        return self.trainer.run()

    def stop(self) -> None:
        self.trainer.stop()


def run_learner_actors(config: Any, run_dir: str | None = None, *, resume: bool = False) -> tuple[str, dict]:
    """Train with the learner as `ray.learner_processes` Ray actors; the run directory and the last metrics."""
    ray = require_ray()
    cfg = config.ray
    started = connect(cfg)
    options = actor_options(cfg, None, cpus=cfg.learner_cpus, gpus=cfg.learner_gpus) | {
        "max_restarts": 0,
        "max_concurrency": 2,
    }
    # a second call at a time: `stop` while `run` runs
    ranks = [ray.remote(LearnerRank).options(**options).remote() for _ in range(cfg.learner_processes)]
    try:
        master = ray.get(ranks[0].rendezvous.remote())
        world = len(ranks)
        setups = [r.setup.remote(config, run_dir, resume, k, world, master) for k, r in enumerate(ranks)]
        try:
            run_dir = ray.get(setups)[0]
            runs = [r.run.remote() for r in ranks]
            try:
                last = ray.get(runs)[0]
            except KeyboardInterrupt:  # every rank stops after its step, checkpointed
                ray.get([r.stop.remote() for r in ranks])
                last = ray.get(runs)[0]
        except ray.exceptions.RayTaskError as error:  # the rank's own error (one line), not Ray's wrapping of it
            raise (error.cause or error) from None
        return run_dir, last
    finally:
        for r in ranks:
            ray.kill(r)
        if started:
            ray.shutdown()
