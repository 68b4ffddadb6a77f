"""What a step's episodes did (`rollout_metrics`), and the trajectory files of the run directory
(`write_trajectories`, `rewind_logs`)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentrl.errors import InfraError
from agentrl.runlog.turn_credit import TurnCredit
from agentrl.types import StopReason, TrajectoryGroup, trajectory_to_json


def success_of(trajectory: Any, primary_reward: str) -> float:
    """An episode succeeds when its primary (first) reward component is 1."""
    return float(trajectory.reward_components.get(primary_reward, 0.0) >= 1.0)


def rollout_metrics(
    groups: Sequence[TrajectoryGroup], primary_reward: str, context_window: int | None = None
) -> dict[str, float]:
    """The step's episode statistics; with the model's `context_window`, also the fraction of valid episodes
    that outgrew it (`tokens/past_context`)."""
    trajs = [t for g in groups for t in g.trajectories]
    valid = [t for t in trajs if not t.is_infra_failure]
    n = max(len(valid), 1)
    lengths = [len(t.token_ids) for t in valid]  # token_ids builds the whole context: once per trajectory
    stops = Counter(t.stop_reason for t in trajs)
    scored = [t.reward for t in valid if t.reward is not None]  # an abstained total is no score, not a score of 0
    out = {
        "reward/mean": sum(scored) / max(len(scored), 1),
        "success/mean": sum(success_of(t, primary_reward) for t in valid) / n,
        "tool_calls/mean": sum(t.num_tool_calls for t in valid) / n,
        "turns/mean": sum(len(t.turns) for t in valid) / n,
        "sampled_tokens/mean": sum(t.num_sampled_tokens for t in valid) / n,
        "tokens/mean": sum(lengths) / n,
        "infra_failures": float(len(trajs) - len(valid)),
    }
    if context_window is not None:
        out["tokens/past_context"] = sum(length > context_window for length in lengths) / n
    out.update({f"stop/{r.value}": stops.get(r, 0) / max(len(trajs), 1) for r in StopReason})
    return out


def write_trajectories(
    run_dir: Path, name: str, groups: Sequence[TrajectoryGroup], credit: TurnCredit | None = None
) -> None:
    """Every trajectory of `groups`, one JSON line each, to `run_dir/trajectories/name`: its task's scaffold, then
    `trajectory_to_json`, each turn with what the update did with it when `credit` is given (`turn_credit.py`)."""
    out = run_dir / "trajectories" / name
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w") as f:
        for g in groups:
            for t in g.trajectories:
                record = {"scaffold": g.task.scaffold, **trajectory_to_json(t)}
                if credit is not None:
                    for turn, fields in zip(record["turns"], credit.turn_fields(t), strict=True):
                        turn.update(fields)
                f.write(json.dumps(record) + "\n")


def rewind_logs(run_dir: Path, step: int) -> None:
    """Drop trajectory logs written after the checkpoint being resumed (the metrics logger rewinds its own
    records), so the run continues as if never stopped."""
    for old in (run_dir / "trajectories").glob("*step_*.jsonl"):
        if int(old.stem.rsplit("_", 1)[1]) > step:
            old.unlink()


def require_some_valid(groups: Sequence[TrajectoryGroup], step: int) -> None:
    """Nothing to learn from a step whose every trajectory failed, and going on would hide a broken setup."""
    trajectories = [t for g in groups for t in g.trajectories]
    if all(t.is_infra_failure for t in trajectories):
        raise InfraError(f"every trajectory of step {step} failed: {trajectories[0].error}")
