"""`agentrl bench scale`: rollout steps per second with 1 and 2 Ray rollout workers, and the weight-sync time.

Both arms run the real path of `agentrl train --ray` (`RayRollouts`: rollout-worker actors on a Ray instance this
bench starts, `ReactScaffold` episodes, the tools in each worker) with the model and the tool simulated in real
time, so that what is measured is how rollouts scale over workers, not this machine's cores:

- each worker's model is `SimulatedPolicy` (`agentrl/bench/rollout_bench.py`): a continuous-batching decoder
  whose decoding step over R live rows takes `step_s + row_s·R` seconds of sleep; a worker stands for one
  inference engine, so two workers halve the rows each decoder carries;
- the tool sleeps a seeded lognormal latency (median `tool_median_s`).

Each arm plays the same tasks with the same seeds for `steps` steps after one warm-up step. The weight sync is
`RayRollouts.publish` of the tiny policy: its weights put in the object store and loaded by every worker.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from agentrl.bench.rollout_bench import SimConfig, SimulatedPolicy, tool_latency_s
from agentrl.tool import tool

SIM = SimConfig(step_s=0.01, row_s=0.002, tool_median_s=0.2, tool_sigma=0.5, reasoning_words_median=4.0)
"""Simulated engine and tool (seconds): a decoding step over 32 rows takes 74 ms, a tool call ~0.2 s."""
TOOL_TURNS = 2


@tool
async def sim_tool(key: int) -> str:
    """A simulated tool call that takes a seeded latency.

    Args:
        key: Seeds the call's latency.
    """
    await asyncio.sleep(tool_latency_s(key, SIM))
    return "ok"


def simulated_policy(tokenizer: Any) -> SimulatedPolicy:
    """Each worker's stand-in for an inference engine."""
    return SimulatedPolicy(tokenizer, SIM, TOOL_TURNS)


def run_benchmark(*, tasks: int = 8, samples: int = 4, steps: int = 3, syncs: int = 5) -> dict[str, Any]:
    """Both arms, then the weight sync; the JSON `agentrl bench scale` prints."""
    import ray

    from agentrl.config import load_config
    from agentrl.policy import load_model_and_tokenizer

    with tempfile.TemporaryDirectory() as scratch:
        task_file = Path(scratch) / "tasks.jsonl"
        task_file.write_text("".join(f'{{"id": "sim/{i}", "prompt": "Simulated task {i}."}}\n' for i in range(tasks)))
        config = load_config(
            None,
            [
                "scaffold=react",
                "tools=[agentrl.bench.scale_bench:sim_tool]",
                f"tasks={task_file}",
                f"rollout.samples_per_prompt={samples}",
                f"rollout.max_turns={TOOL_TURNS + 1}",
                "rollout.max_new_tokens_per_turn=256",
                "ray.enabled=true",
                "ray.tool_servers=0",
                "ray.worker_cpus=0.5",
            ],
        )
        ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", namespace="agentrl-bench")
        try:
            arms = {f"workers_{n}": _arm(config, n, steps) for n in (1, 2)}
            model, _ = load_model_and_tokenizer(config.policy)
            sync = _sync(replace(config, ray=replace(config.ray, rollout_workers=2)), model, syncs)
        finally:
            ray.shutdown()
    one, two = arms["workers_1"], arms["workers_2"]
    return {
        "simulated": {"step_s": SIM.step_s, "row_s": SIM.row_s, "tool_median_s": SIM.tool_median_s},
        "trajectories_per_step": tasks * samples,
        **arms,
        "steps_per_s_ratio_2_vs_1": round(two["steps_per_s"] / one["steps_per_s"], 3),
        "weight_sync": sync,
    }


def _arm(config: Any, workers: int, steps: int) -> dict[str, float]:
    from agentrl.builders import build_scaffold
    from agentrl.distributed.ray_rollouts import RayRollouts

    config = replace(config, ray=replace(config.ray, rollout_workers=workers))
    tasks = build_scaffold(config, config.rollout).tasks("train")
    rollouts = RayRollouts(config, f"scale-{workers}", policy_factory=simulated_policy)
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(rollouts.collect(tasks, 0))  # warm-up: imports, first requests
        started = time.monotonic()
        for step in range(1, steps + 1):
            groups = loop.run_until_complete(rollouts.collect(tasks, step))
            failed = [t.error for g in groups for t in g.trajectories if t.is_infra_failure]
            if failed:
                raise RuntimeError(f"simulated rollout failed: {failed[0]}")
        seconds = time.monotonic() - started
    finally:
        loop.close()
        _close(rollouts)
    return {"steps_per_s": round(steps / seconds, 3), "seconds_per_step": round(seconds / steps, 3)}


def _sync(config: Any, model: Any, syncs: int) -> dict[str, float]:
    from agentrl.distributed.ray_rollouts import RayRollouts

    rollouts = RayRollouts(config, "scale-sync", policy_factory=simulated_policy)
    try:
        first = time.monotonic()
        rollouts.publish(model, 0)  # every weight, as at the start of a run
        first_s = time.monotonic() - first
        seconds = []
        for version in range(1, syncs + 1):
            started = time.monotonic()
            rollouts.publish(model, version)
            seconds.append(time.monotonic() - started)
    finally:
        _close(rollouts)
    megabytes = sum(t.numel() * t.element_size() for t in model.state_dict().values()) / 2**20
    return {
        "workers": config.ray.rollout_workers,
        "weights_mb": round(megabytes, 2),
        "first_publish_s": round(first_s, 4),
        "publish_s_median": round(statistics.median(seconds), 4),
    }


def _close(rollouts: Any) -> None:
    """Stop the arm's actors; the bench's own Ray instance stays up for the next arm."""
    rollouts.started_ray = False
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(rollouts.aclose())
    finally:
        loop.close()


def format_table(result: dict[str, Any]) -> str:
    simulated = result["simulated"]
    rows = [f"trajectories per step: {result['trajectories_per_step']} (simulated model and tool: {simulated})"]
    for n in (1, 2):
        arm = result[f"workers_{n}"]
        rows.append(f"  {n} rollout worker(s): {arm['steps_per_s']:.3f} steps/s ({arm['seconds_per_step']:.2f} s/step)")
    rows.append(f"  2 vs 1 workers: {result['steps_per_s_ratio_2_vs_1']:.2f}x steps/s")
    sync = result["weight_sync"]
    rows.append(
        f"weight sync through the object store to {sync['workers']} workers: {sync['weights_mb']} MB, "
        f"median {sync['publish_s_median'] * 1000:.1f} ms "
        f"(first, every weight: {sync['first_publish_s'] * 1000:.1f} ms)"
    )
    return "\n".join(rows)
