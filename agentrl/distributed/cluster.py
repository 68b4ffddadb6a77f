"""Joining the Ray cluster of a run, and the environment its actors inherit.

A run joins the cluster `ray.address` names, or starts a Ray instance on this machine (with `ray.local_cpus` and
`ray.object_store_mb`) when none is named; either way the actors of the run live in `ray.namespace`. Actors get the
variables that decide what agentrl, Hugging Face and torch may do (offline mode, caches, tokens, sandbox debug) in
their runtime environment, because a worker process on another node does not inherit this process's environment.
"""

from __future__ import annotations

import os
from typing import Any

from agentrl.distributed.config import RayConfig
from agentrl.errors import ConfigError, DependencyError

FORWARDED_PREFIXES = ("AGENTRL_", "HF_", "TRANSFORMERS_", "TOKENIZERS_", "OMP_NUM_THREADS", "WANDB_")


def require_ray() -> Any:
    """The `ray` module, or a one-line `DependencyError` saying how to install it."""
    try:
        import ray
    except ImportError:
        raise DependencyError("Ray is not installed: pip install 'agentrl[ray]'") from None
    return ray


def connect(config: RayConfig) -> bool:
    """Join (or start) the cluster; True when this call started a Ray instance that the run must shut down."""
    ray = require_ray()
    if ray.is_initialized():
        return False
    env = {key: value for key, value in os.environ.items() if key.startswith(FORWARDED_PREFIXES)}
    options: dict[str, Any] = {
        "namespace": config.namespace,
        "include_dashboard": False,
        "runtime_env": {"env_vars": env},
        "logging_level": "WARNING",
    }
    if config.address is None:
        object_store = config.object_store_mb * 2**20 if config.object_store_mb else None
        ray.init(num_cpus=config.local_cpus, object_store_memory=object_store, **options)
        return True
    try:
        ray.init(address=config.address, **options)
    except (ConnectionError, RuntimeError, ValueError) as error:
        raise ConfigError(f"could not join the Ray cluster at {config.address}: {error}") from None
    return False


def actor_options(config: RayConfig, name: str | None, *, cpus: float, gpus: float = 0.0) -> dict[str, Any]:
    """Options of a named, restartable actor of the run (`ray.max_restarts`); Ray does not retry its calls by
    itself, so the caller decides what a call lost with a dead actor becomes."""
    return {
        "name": name,
        "namespace": config.namespace,
        "num_cpus": cpus,
        "num_gpus": gpus,
        "max_restarts": config.max_restarts,
        "max_task_retries": 0,
    }
