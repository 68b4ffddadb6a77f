"""`RunReader`: read-only access to one run directory, for the viewer, while a run may still be writing it.

It answers what the page asks: the run's steps and metric curves (`metrics.jsonl`, re-read when it changes), the
trajectory files of each step and evaluation, a page of a step's groups filtered by scaffold, reward, stop reason
and text, one trajectory, a group's branch tree, and a task's trajectories in one file. Trajectory files are
opened through `TrajectoryFile` indexes (a bounded number kept), so no request reads more than the lines it
shows, a search aside, which reads only the text of the lines it filters.

Every file it opens is named by the run's layout (`metrics.jsonl`, `config.toml`, `trajectories/step_N.jsonl`,
`trajectories/eval_step_N.jsonl`) and must resolve inside the run directory: a name of any other shape, or a
symbolic link that leads out of the run, is refused with `InputError`.
"""

from __future__ import annotations

import re
import threading
import tomllib
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrl.errors import InputError
from agentrl.runlog.metrics_file import METRICS_FILE, read_metrics
from agentrl.view.branch_tree import branch_tree
from agentrl.view.token_decoder import TokenDecoder
from agentrl.view.trajectory_file import TrajectoryFile
from agentrl.view.trajectory_page import finite, trajectory_page

FILE_NAME = re.compile(r"(eval_)?step_(\d{1,9})\.jsonl")
CURVES = {
    "reward": "reward/mean",
    "heldout_success": "eval/success",
    "tokens_per_s": "rollout/tokens_per_s",
    "logprob_gap": "train/sampler_logprob_abs_diff",
}
"""The metric curves of the timeline: the name the page uses → the key in metrics.jsonl."""
KEPT_FILES = 24
"""Trajectory-file indexes kept at once (each holds a summary per line)."""


@dataclass(frozen=True)
class Filters:
    """Which trajectories of a file a list shows; a group is shown when any of its trajectories is."""

    scaffold: str | None = None
    stop_reason: str | None = None
    reward_min: float | None = None
    reward_max: float | None = None
    query: str | None = None

    def keeps(self, summary: dict[str, Any]) -> bool:
        if self.scaffold and summary.get("scaffold") != self.scaffold:
            return False
        if self.stop_reason and summary.get("stop_reason") != self.stop_reason:
            return False
        if self.reward_min is None and self.reward_max is None:
            return True
        reward = finite(summary.get("reward"))
        if reward is None:  # no score: shown only when no reward bound is set
            return False
        return (self.reward_min is None or reward >= self.reward_min) and (
            self.reward_max is None or reward <= self.reward_max
        )


class RunReader:
    """One run directory, read lazily; safe to call from several request threads."""

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir).resolve()
        if not self.run_dir.is_dir():
            raise InputError(f"{run_dir} is not a directory")
        if not (self.run_dir / METRICS_FILE).exists() and not (self.run_dir / "trajectories").is_dir():
            raise InputError(f"{run_dir} is not a run directory: it has neither {METRICS_FILE} nor trajectories/")
        self._files: OrderedDict[str, TrajectoryFile] = OrderedDict()
        self._metrics: tuple[Any, list[dict[str, Any]]] = (None, [])
        self._decoder: TokenDecoder | None = None
        self._lock = threading.Lock()

    # --- the run -------------------------------------------------------------------------------------------

    def config(self) -> dict[str, Any]:
        path = self._inside(self.run_dir / "config.toml")
        try:
            return tomllib.loads(path.read_text()) if path.is_file() else {}
        except (tomllib.TOMLDecodeError, UnicodeDecodeError):
            return {}

    def overview(self) -> dict[str, Any]:
        """The run's name and settings, its steps (with which files each has) and the timeline's curves."""
        config = self.config()
        records = self._read_metrics()
        files = self.trajectory_files()
        steps: dict[int, dict[str, Any]] = {}
        for record in records:
            point = steps.setdefault(record["step"], {"step": record["step"]})
            point.update({name: finite(record.get(key)) for name, key in CURVES.items()})
        for name in files:
            match = FILE_NAME.fullmatch(name)
            step = steps.setdefault(int(match[2]), {"step": int(match[2])})
            step["eval_file" if match[1] else "train_file"] = name
        rollout = config.get("rollout", {})
        return {
            "name": config.get("name") or self.run_dir.name,
            "run_dir": str(self.run_dir),
            "scaffold": config.get("scaffold"),
            "model": config.get("policy", {}).get("model"),
            "branching": rollout.get("branching", "none"),
            "steps": [steps[s] for s in sorted(steps)],
            "curves": list(CURVES),
            "version": self._version(),
        }

    def trajectory_files(self) -> list[str]:
        folder = self.run_dir / "trajectories"
        if not folder.is_dir():
            return []
        return sorted(p.name for p in folder.iterdir() if FILE_NAME.fullmatch(p.name))

    # --- one file ------------------------------------------------------------------------------------------

    def groups(self, name: str, filters: Filters, offset: int = 0, limit: int = 20) -> dict[str, Any]:
        """A page of the file's groups in file order, each with its trajectories that pass `filters`."""
        file = self._file(name)
        entries = file.refresh()
        summaries = [e.summary for e in entries]
        kept = [s["index"] for s in summaries if filters.keeps(s)]
        if filters.query:
            kept = file.matching(kept, filters.query)
        order: OrderedDict[Any, list[dict[str, Any]]] = OrderedDict()
        for i in kept:
            order.setdefault(summaries[i].get("group_id"), []).append(summaries[i])
        sizes: dict[Any, list[float | None]] = {}
        for s in summaries:
            sizes.setdefault(s.get("group_id"), []).append(finite(s.get("reward")))
        page = list(order.items())[offset : offset + limit]
        return {
            "file": name,
            "trajectories": len(summaries),
            "matching": len(kept),
            "groups_matching": len(order),
            "offset": offset,
            "groups": [_group(group_id, members, sizes[group_id]) for group_id, members in page],
            "facets": {
                "scaffolds": sorted({s["scaffold"] for s in summaries if s.get("scaffold")}),
                "stop_reasons": sorted({s["stop_reason"] for s in summaries if s.get("stop_reason")}),
            },
        }

    def trajectory(self, name: str, index: int) -> dict[str, Any]:
        file = self._file(name)
        entries = file.refresh()
        if not 0 <= index < len(entries):
            raise InputError(f"{name} has no trajectory {index}")
        page = trajectory_page(file.read(index), self.decoder())
        return {**page, "file": name, "index": index, "summary": entries[index].summary}

    def tree(self, name: str, group_id: str) -> dict[str, Any]:
        file = self._file(name)
        members = [e.summary for e in file.refresh() if e.summary.get("group_id") == group_id]
        if not members:
            raise InputError(f"{name} has no group {group_id!r}")
        decoder = self.decoder()
        tokens = int(self.config().get("rollout", {}).get("branch_entropy_tokens", 20))
        roots = branch_tree(members, file.read, entropy_tokens=tokens, vocab_size=decoder.vocab_size)
        return {
            "file": name,
            "group_id": group_id,
            "entropy_tokens": tokens,
            "normalised": bool(decoder.available),
            "roots": roots,
        }

    def task(self, name: str, task_id: str) -> dict[str, Any]:
        """The trajectories of `task_id` in one file (to set two steps side by side)."""
        members = [e.summary for e in self._file(name).refresh() if e.summary.get("task_id") == task_id]
        return {"file": name, "task_id": task_id, "trajectories": members}

    def decoder(self) -> TokenDecoder:
        with self._lock:
            if self._decoder is None or not self._decoder.available:  # a checkpoint may have appeared since
                model = self.config().get("policy", {}).get("model")
                self._decoder = TokenDecoder.for_run(self.run_dir, model)
            return self._decoder

    # --- plumbing ------------------------------------------------------------------------------------------

    def _file(self, name: str) -> TrajectoryFile:
        if not FILE_NAME.fullmatch(name):
            raise InputError(f"not a trajectory file of a run: {name!r}")
        path = self._inside(self.run_dir / "trajectories" / name)
        if not path.is_file():
            raise InputError(f"the run has no {name}")
        with self._lock:
            file = self._files.pop(name, None) or TrajectoryFile(path, default_scaffold=self._default_scaffold())
            self._files[name] = file
            while len(self._files) > KEPT_FILES:
                self._files.popitem(last=False)
        return file

    def _default_scaffold(self) -> str | None:
        """The scaffold of records that name none (a run of one scaffold whose tasks do not say)."""
        scaffold = self.config().get("scaffold")
        return scaffold if isinstance(scaffold, str) and "+" not in scaffold else None

    def _inside(self, path: Path) -> Path:
        """`path` resolved, refused unless it stays inside the run directory (symbolic links followed)."""
        resolved = path.resolve()
        if not resolved.is_relative_to(self.run_dir):
            raise InputError(f"{path.name} leads outside the run directory")
        return resolved

    def _read_metrics(self) -> list[dict[str, Any]]:
        path = self._inside(self.run_dir / METRICS_FILE)
        stamp = _stamp(path)
        with self._lock:
            if stamp != self._metrics[0]:
                self._metrics = (stamp, read_metrics(self.run_dir) if stamp is not None else [])
            return self._metrics[1]

    def _version(self) -> str:
        """Changes whenever the run writes a step: the page polls it to stay live."""
        folder = self.run_dir / "trajectories"
        return f"{_stamp(self.run_dir / METRICS_FILE)}/{_stamp(folder)}"


def _group(group_id: Any, members: list[dict[str, Any]], rewards: list[float | None]) -> dict[str, Any]:
    scored = [r for r in rewards if r is not None]
    return {
        "group_id": group_id,
        "task_id": members[0].get("task_id"),
        "scaffold": members[0].get("scaffold"),
        "size": len(rewards),
        "reward_mean": sum(scored) / len(scored) if scored else None,
        "reward_spread": (max(scored) - min(scored)) if scored else None,
        "forks": sum(1 for m in members if m.get("parent_id")),
        "trajectories": members,
    }


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return (stat.st_size, stat.st_mtime_ns)
