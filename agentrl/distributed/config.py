"""`RayConfig`: where a run's rollout workers and tool servers live on a Ray cluster (`agentrl train --ray`)."""

from __future__ import annotations

from dataclasses import dataclass

from agentrl.errors import ConfigError


@dataclass(frozen=True)
class RayConfig:
    """Rollouts on a Ray cluster: rollout workers and tool servers as Ray actors, the learner in this process."""

    enabled: bool = False
    """Play the episodes on Ray actors (`agentrl train --ray [ADDRESS]` sets it; `pip install 'agentrl[ray]'`)."""
    address: str | None = None
    """The cluster to join: `auto` (the one this machine belongs to), `HOST:PORT` or `ray://HOST:PORT`; None =
    start a Ray instance on this machine for the run."""
    rollout_workers: int = 2
    """Rollout-worker actors. Each holds a sampler of its own (an in-process replica of the policy, an in-process
    vLLM engine, or clients of `policy.base_url`) and plays its share of each step's tasks."""
    tool_servers: int = 2
    """Tool-server actors, spread over the cluster's nodes; each rollout worker spreads its sessions over all of
    them. 0 = every rollout worker holds the toolsets itself (or uses `tool_servers` URLs when set)."""
    learner_processes: int = 0
    """0 = the learner runs in the `agentrl train` process (or its `--nproc` processes); N = as N Ray actors, one
    data-parallel rank each, placed by Ray (with `learner_gpus` GPUs each), while `agentrl train` only waits."""
    learner_gpus: float = 0.0
    """GPUs Ray reserves for each learner actor (`learner_processes`)."""
    learner_cpus: float = 1.0
    """CPUs Ray reserves for each learner actor (`learner_processes`)."""
    worker_cpus: float = 1.0
    """CPUs Ray reserves for each rollout worker."""
    worker_gpus: float = 0.0
    """GPUs Ray reserves for each rollout worker (1 for a vLLM engine per worker)."""
    tool_server_cpus: float = 0.0
    """CPUs Ray reserves for each tool server (its sandboxes are processes of their own, outside Ray's count)."""
    max_restarts: int = 3
    """How often Ray restarts a rollout worker or tool server that died; their episodes in flight are re-issued
    (rollout workers) or end as infrastructure failures (tool servers), never as zero rewards."""
    reissue_attempts: int = 3
    """Tries per group when its rollout worker dies; a group still unplayed after them ends as infrastructure
    failures."""
    namespace: str = "agentrl"
    """Ray namespace of the run's actors (named `RUN/rollout-I` and `RUN/tools-I`, to find them with
    `ray.get_actor`)."""
    local_cpus: int | None = None
    """CPUs of a Ray instance started here (`address` unset); None = every CPU of this machine."""
    object_store_mb: int | None = None
    """Object-store memory of a Ray instance started here, in MiB; None = Ray's default."""

    def __post_init__(self) -> None:
        if self.rollout_workers < 1:
            raise ConfigError(f"ray.rollout_workers must be >= 1, not {self.rollout_workers}")
        if min(self.tool_servers, self.max_restarts, self.learner_processes) < 0 or self.reissue_attempts < 1:
            raise ConfigError(
                "ray.tool_servers, ray.max_restarts and ray.learner_processes must be >= 0, ray.reissue_attempts >= 1"
            )
