"""Evaluation results: one JSON line per (task, sample), appended as each episode finishes.

The file is the resume point: a rerun reads it and skips every (task, sample) already finished. Episodes that
failed for infrastructure reasons (endpoint down, retries exhausted) are recorded too, for the report, but do not
count as finished, so a rerun tries them again; the latest record of a (task, sample) wins.

A rerun resumes only results of the same settings: `<results>.settings.json` beside the file holds what decides
an episode's outcome (model, scaffold, tasks, sampling, turn limits), and `claim` refuses a file whose settings
differ, naming `--overwrite` (start over) and `--output` (another file).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agentrl.types import StopReason, Trajectory


@dataclass(frozen=True)
class EvalRecord:
    """The outcome of one evaluation episode."""

    task_id: str
    sample: int
    success: bool
    reward: float | None
    stop_reason: str
    turns: int
    tool_calls: int
    prompt_tokens: int
    """Tokens sent to the model over all turns of the episode (what an API bills as input)."""
    completion_tokens: int
    """Tokens the model produced over all turns."""
    latency_s: float
    """Wall time of the episode, tool calls included."""
    answer: str | None = None
    error: str | None = None
    reward_components: dict[str, float] = field(default_factory=dict)
    measurements: dict[str, float] = field(default_factory=dict)
    messages: list[dict[str, Any]] = field(default_factory=list)
    scaffold: str | None = None
    """The scaffold the task belongs to (which part of a mixture such as `code+search`); None when the task names
    none."""

    @property
    def finished(self) -> bool:
        return self.stop_reason != StopReason.INFRA_ERROR.value

    @classmethod
    def from_trajectory(
        cls,
        trajectory: Trajectory,
        *,
        sample: int,
        success: bool,
        latency_s: float,
        prompt_tokens: int,
        completion_tokens: int,
        scaffold: str | None = None,
    ) -> EvalRecord:
        return cls(
            task_id=trajectory.task_id,
            sample=sample,
            success=success,
            reward=trajectory.reward,
            stop_reason=trajectory.stop_reason.value,
            turns=len(trajectory.turns),
            tool_calls=trajectory.num_tool_calls,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            latency_s=round(latency_s, 4),
            answer=trajectory.answer,
            error=trajectory.error,
            reward_components=dict(trajectory.reward_components),
            measurements=dict(trajectory.measurements),
            messages=[_without_image_data(m) for m in trajectory.messages],
            scaffold=scaffold,
        )


def _without_image_data(message: dict[str, Any]) -> dict[str, Any]:
    """The message with each inline image's data replaced by its size: screenshots would make the results file
    tens of megabytes, and the page outline next to them is what a reader of the file wants."""
    content = message.get("content")
    if not isinstance(content, list):
        return message
    parts = []
    for part in content:
        url = part.get("image_url", {}).get("url", "") if part.get("type") == "image_url" else ""
        if url.startswith("data:"):
            part = {"type": "image_url", "image_url": {"url": f"{url[: url.find(',') + 1]}[{len(url)} characters]"}}
        parts.append(part)
    return {**message, "content": parts}


def token_counts(trajectory: Trajectory) -> tuple[int, int]:
    """(prompt, completion) tokens of a token-level trajectory, counted as an API would bill its turns."""
    context, prompt_total = len(trajectory.prompt_ids), 0
    for turn in trajectory.turns:
        prompt_total += context
        context += len(turn.completion_ids) + len(turn.observation_ids)
    return prompt_total, trajectory.num_sampled_tokens


class ResultsStore:
    """An append-only JSONL file of `EvalRecord`s."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists() and self.path.stat().st_size:
            with self.path.open("rb") as f:
                f.seek(-1, 2)
                ended = f.read(1) == b"\n"
            if not ended:  # a killed run left half a line; start the next record on its own line
                with self.path.open("a") as f:
                    f.write("\n")

    def load(self) -> list[EvalRecord]:
        """The latest record of every (task, sample), in first-seen order; a truncated last line is skipped."""
        latest: dict[tuple[str, int], EvalRecord] = {}
        if self.path.exists():
            for line in self.path.read_text().splitlines():
                try:
                    data = json.loads(line)
                except json.JSONDecodeError:
                    continue
                record = EvalRecord(**data)
                latest[(record.task_id, record.sample)] = record
        return list(latest.values())

    @property
    def settings_path(self) -> Path:
        return self.path.with_suffix(".settings.json")

    def claim(self, settings: dict[str, Any], *, overwrite: bool = False) -> None:
        """Make the file hold results of `settings`: resume it when its records were made with the same settings,
        start it over with `overwrite`, and raise `ConfigError` otherwise (saying how they differ)."""
        from agentrl.errors import ConfigError

        settings = json.loads(json.dumps(settings))  # as stored: lists, not tuples
        if overwrite:
            self.path.write_text("")
            for stale in (self.path.with_suffix(".summary.json"), self.path.with_suffix(".png")):
                stale.unlink(missing_ok=True)
        elif self.load():
            stored = json.loads(self.settings_path.read_text()) if self.settings_path.is_file() else None
            if stored != settings:
                what = "of unrecorded settings" if stored is None else f"of other settings ({_diff(stored, settings)})"
                raise ConfigError(
                    f"{self.path} holds results {what}: pass --overwrite to replace them, or --output FILE to keep both"
                )
        self.settings_path.write_text(json.dumps(settings, indent=2, sort_keys=True) + "\n")

    def finished(self) -> set[tuple[str, int]]:
        return {(r.task_id, r.sample) for r in self.load() if r.finished}

    def append(self, record: EvalRecord) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(asdict(record)) + "\n")
            f.flush()


def _diff(stored: dict[str, Any], now: dict[str, Any]) -> str:
    """`temperature 1.0 there, 0.0 now; …` for the settings that differ."""
    keys = sorted(k for k in {*stored, *now} if stored.get(k) != now.get(k))
    return "; ".join(f"{k} {json.dumps(stored.get(k))} there, {json.dumps(now.get(k))} now" for k in keys)
