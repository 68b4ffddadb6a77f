"""`build_rollouts`: where a run's episodes are played: rollout workers on a Ray cluster (`RayRollouts`), this
process (`LocalRollouts`, `agentrl/rollout/local_rollouts.py`), and, for a data-parallel rank, its share of either
(`ShardedRollouts`)."""

from __future__ import annotations

from typing import Any

from agentrl.builders import build_tool_client


def build_rollouts(
    config: Any, scaffold: Any, eval_scaffold: Any, policy: Any, run_name: str, data_parallel: Any = None
) -> Any:
    """Where the run's episodes are played: rollout workers on a Ray cluster (`ray.enabled`, `agentrl train
    --ray`), else this process, with the tool backend `build_tool_client` names. Ranks of a multi-process run
    (`data_parallel`) each get their share of the groups (on Ray, rank 0 holds the workers)."""
    central = config.ray.enabled
    if central and (data_parallel is None or data_parallel.is_main):
        from agentrl.distributed.ray_rollouts import RayRollouts

        inner = RayRollouts(config, run_name)
    elif central:
        inner = None
    else:
        from agentrl.rollout.local_rollouts import LocalRollouts

        inner = LocalRollouts(config, scaffold, eval_scaffold, policy, build_tool_client(config, scaffold))
    if data_parallel is None or not data_parallel.enabled:
        return inner
    from agentrl.distributed.sharded_rollouts import ShardedRollouts

    return ShardedRollouts(inner, data_parallel, central=central)
