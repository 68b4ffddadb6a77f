"""What `agentrl bench trl` reports: each side's per-step record, its summary (medians after the warm-up step,
rewards), the TRL / agentrl ratios against the target, and the console table."""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass, field
from typing import Any

TARGET_RATIO = 2.0
"""TRL's seconds per step over agentrl's that the benchmark asks for (wall clock, median)."""


@dataclass
class SideRecord:
    """One side's per-step measurements."""

    wall_s: list[float] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)
    reward: list[float] = field(default_factory=list)
    phases: dict[str, list[float]] = field(default_factory=dict)
    """Phase timers per step: agentrl's own (`time/collect_s`, `time/update_s`, ...), TRL's generation phase."""


def summarize(config: Any, records: dict[str, SideRecord], machine: dict[str, Any] | None = None) -> dict:
    """Per side: every step's figures, medians after the first step, mean rewards; then the TRL / agentrl ratios.
    `config` is the run's `TrlBenchConfig` (`agentrl.bench.trl_bench`, which imports this module)."""
    sides = {name: _side_summary(record) for name, record in records.items()}
    wall_ratio = sides["trl"]["median_wall_s"] / max(sides["agentrl"]["median_wall_s"], 1e-9)
    cpu_ratio = sides["trl"]["median_cpu_s"] / max(sides["agentrl"]["median_cpu_s"], 1e-9)
    ours, theirs = sides["agentrl"]["mean_reward_last_half"], sides["trl"]["mean_reward_last_half"]
    noise = 2 * _difference_se(ours, theirs, _last_half_trajectories(config, records["agentrl"]))
    reward_ok = ours >= theirs - noise
    return {
        "workload": {k: v for k, v in dataclasses.asdict(config).items() if k != "agentrl_overrides"},
        "agentrl_overrides": list(config.agentrl_overrides),
        "machine": machine or {},
        **sides,
        "trl_over_agentrl_wall": round(wall_ratio, 2),
        "trl_over_agentrl_cpu": round(cpu_ratio, 2),
        "target_ratio": TARGET_RATIO,
        "reward_difference": round(ours - theirs, 3),
        "reward_noise_2se": round(noise, 3),
        "reward_not_worse": reward_ok,
        "meets_target": wall_ratio >= TARGET_RATIO and reward_ok,
    }


def _last_half_trajectories(config: Any, record: SideRecord) -> int:
    steps = len(record.reward) - len(record.reward) // 2
    return steps * config.prompts_per_step * config.samples_per_prompt


def _difference_se(p: float, q: float, n: int) -> float:
    """The standard error of the difference of two success rates over `n` trajectories each: two sides drawing
    from the same distribution differ by more than twice this about one time in twenty, so "equal reward" is a
    difference within it, where `>=` alone would call the slower half of equal runs worse."""
    return math.sqrt((p * (1 - p) + q * (1 - q)) / max(n, 1))


def _side_summary(record: SideRecord) -> dict[str, Any]:
    timed = slice(1, None) if len(record.wall_s) > 1 else slice(None)
    half = record.reward[len(record.reward) // 2 :]
    out: dict[str, Any] = {
        "median_wall_s": round(statistics.median(record.wall_s[timed]), 3),
        "median_cpu_s": round(statistics.median(record.cpu_s[timed]), 3),
        "mean_reward": round(statistics.fmean(record.reward), 3),
        "mean_reward_last_half": round(statistics.fmean(half), 3),
        "wall_s": [round(x, 3) for x in record.wall_s],
        "cpu_s": [round(x, 3) for x in record.cpu_s],
        "reward": [round(x, 3) for x in record.reward],
    }
    if record.phases:
        out["median_phase_s"] = {k: round(statistics.median(v[timed]), 3) for k, v in record.phases.items()}
    return out


def format_table(result: dict[str, Any]) -> str:
    """A few lines for the console: per side medians and the reward curve, then the ratios."""
    lines = [f"{'side':8s} {'wall s/step':>12s} {'cpu s/step':>11s}  reward by step"]
    for side in ("agentrl", "trl"):
        s = result[side]
        curve = " ".join(f"{r:.2f}" for r in s["reward"])
        lines.append(f"{side:8s} {s['median_wall_s']:12.2f} {s['median_cpu_s']:11.2f}  {curve}")
    lines.append(
        f"TRL / agentrl: wall {result['trl_over_agentrl_wall']:.2f}x, cpu {result['trl_over_agentrl_cpu']:.2f}x "
        f"(target {result['target_ratio']:.0f}x wall at equal reward, last half {result['reward_difference']:+.3f}, "
        f"noise ±{result['reward_noise_2se']:.3f}: "
        f"{'met' if result['meets_target'] else 'not met'})"
    )
    return "\n".join(lines)
