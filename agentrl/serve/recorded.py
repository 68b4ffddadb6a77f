"""Recorded gateway sessions as training data: episodes → trajectory groups → one learner step.

Episodes that opened with the same system and user messages (or carried the same `X-Agentrl-Group` header)
form a group, like the samples of one task in a scaffold rollout, and go through the same credit assignment and
`Learner` as scaffold rollouts. Episodes whose history the client rewrote (`history` mismatches) and episodes
without a reward are left out, and the report says which and why; `retokenized` mismatches are reported but
trained on, since the recorded ids are the ones the model saw. Reading a recording back, and a recording as a task
source, is `recorded_sessions.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentrl.config import TrainerConfig
from agentrl.errors import InputError
from agentrl.serve.recorded_sessions import load_recorded
from agentrl.types import Task, Trajectory, TrajectoryGroup, trajectory_from_json


def recorded_groups(
    episodes: Sequence[Any], *, allow_history_mismatch: bool = False
) -> tuple[list[TrajectoryGroup], dict[str, Any]]:
    """Trajectory groups of the trainable episodes (`Episode`s or their JSON), and a report of what was left out."""
    report: dict[str, Any] = {"episodes": len(episodes), "history_mismatch": [], "unscored": [], "retokenized": []}
    groups: dict[str, list[Trajectory]] = {}
    for episode in episodes:
        data = episode if isinstance(episode, dict) else episode.to_json()
        trajectory = trajectory_from_json(data["trajectory"])
        kinds = {m["kind"] for m in data["mismatches"]}
        if "retokenized" in kinds:
            report["retokenized"].append(data["episode_id"])
        if "history" in kinds and not allow_history_mismatch:
            report["history_mismatch"].append(data["episode_id"])
            continue
        if trajectory.reward is None or not trajectory.turns:
            report["unscored"].append(data["episode_id"])
            continue
        groups.setdefault(data["group"], []).append(trajectory)
    out = [TrajectoryGroup(Task(id=g, prompt=_prompt(ts[0])), tuple(ts)) for g, ts in groups.items()]
    report["trainable"] = sum(len(g.trajectories) for g in out)
    report["groups"] = len(out)
    return out, report


def _prompt(trajectory: Trajectory) -> str:
    users = [m.get("content") or "" for m in trajectory.messages if m.get("role") == "user"]
    return users[0] if users else ""


def sampling_temperature(episodes: Sequence[Any]) -> float:
    """The one temperature the episodes were sampled at (the learner must score at the same one)."""
    temps = {t for e in episodes for t in (e["temperatures"] if isinstance(e, dict) else e.temperatures)}
    if len(temps) != 1:
        raise InputError(f"recorded episodes were sampled at several temperatures {sorted(temps)}; train them apart")
    (temperature,) = temps
    if temperature <= 0:
        raise InputError("greedy (temperature 0) episodes have no sampling distribution to train on")
    return temperature


def train_recorded_step(
    model: Any,
    tokenizer: Any,
    episodes: Sequence[Any],
    config: TrainerConfig | None = None,
    *,
    learner: Any = None,
    allow_history_mismatch: bool = False,
) -> dict[str, Any]:
    """One learner step on recorded episodes: groups → credit → `Learner.update`; returns metrics and report."""
    from agentrl.credit.assign import assign_credit
    from agentrl.train.learner import Learner

    config = config or TrainerConfig()
    groups, report = recorded_groups(episodes, allow_history_mismatch=allow_history_mismatch)
    trainable = [
        e
        for e in episodes
        if (e["episode_id"] if isinstance(e, dict) else e.episode_id)
        in {t.trajectory_id for g in groups for t in g.trajectories}
    ]
    samples, credit = assign_credit(
        groups, config.advantage, skip_zero_advantage_groups=config.skip_zero_advantage_groups
    )
    if not samples:
        return {"report": report, **credit, "skipped": 1.0}
    if learner is None:
        learner = Learner(
            model, config, pad_token_id=tokenizer.pad_token_id, temperature=sampling_temperature(trainable)
        )
    return {"report": report, **credit, **learner.update(samples)}


def train_recorded(
    source: str | Path,
    *,
    model: str = "tiny",
    output: str | Path | None = None,
    steps: int = 1,
    config: TrainerConfig | None = None,
    device: str = "auto",
) -> list[dict[str, Any]]:
    """The body of `agentrl train-recorded`: learner steps on a gateway's recorded sessions, then save."""
    from agentrl.config import PolicyConfig
    from agentrl.policy import load_model_and_tokenizer
    from agentrl.train.learner import Learner

    config = config or TrainerConfig()
    episodes = load_recorded(source)
    loaded, tokenizer = load_model_and_tokenizer(PolicyConfig(model=model, device=device))
    groups, _ = recorded_groups(episodes)
    kept = {t.trajectory_id for g in groups for t in g.trajectories}
    temperature = sampling_temperature([e for e in episodes if e["episode_id"] in kept]) if kept else 1.0
    learner = Learner(loaded, config, pad_token_id=tokenizer.pad_token_id, temperature=temperature)
    history = [train_recorded_step(loaded, tokenizer, episodes, config, learner=learner) for _ in range(steps)]
    if output is not None:
        from agentrl.config import dump_toml
        from agentrl.train.model_card import write_model_card

        loaded.save_pretrained(output)
        tokenizer.save_pretrained(output)
        numbers = {k: float(v) for k, v in history[-1].items() if isinstance(v, (int, float))} if history else {}
        write_model_card(output, base_model=model, step=steps, config_toml=dump_toml(config), metrics=numbers)
    return history
