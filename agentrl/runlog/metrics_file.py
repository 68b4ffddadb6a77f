"""`metrics.jsonl` read back: a run's records one per step (`read_metrics`), a metric's points (`series`), and the
rules for a file a killed run left behind, which the writer (`MetricsLogger`, `metrics.py`) follows too.

A record for an earlier step than the one before it rewinds the history to that step (a resumed run replays
from its checkpoint); several records for one step merge, later values winning; a truncated last line is a
write cut short by a kill, skipped when read and cut before the next append.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from pathlib import Path
from typing import Any

METRICS_FILE = "metrics.jsonl"

Record = dict[str, Any]


def read_metrics(run_dir: str | Path) -> list[Record]:
    """The run's records in step order, one per step (see the module docstring for how replays resolve).

    Returns an empty list when the run directory has no `metrics.jsonl` yet.
    """
    merged: dict[int, Record] = {}
    last_step: int | None = None
    for record in read_records(Path(run_dir) / METRICS_FILE):
        step = int(record["step"])
        if last_step is not None and step < last_step:
            # A resumed run replays from its checkpoint: what was logged past that point is superseded.
            merged = {s: r for s, r in merged.items() if s < step}
        merged.setdefault(step, {}).update(record)
        last_step = step
    return [merged[s] for s in sorted(merged)]


def series(records: list[Record], key: str, x: str = "step") -> tuple[list[float], list[float]]:
    """The (x, y) points of `key` over the records that have both, with non-finite values dropped."""
    xs, ys = [], []
    for r in records:
        xv, yv = r.get(x), r.get(key)
        if isinstance(xv, (int, float)) and isinstance(yv, (int, float)) and math.isfinite(yv):
            xs.append(float(xv))
            ys.append(float(yv))
    return xs, ys


def step_of(line: str) -> int | None:
    """The step a line records, or None for a line that is no record."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        return None
    return int(record["step"]) if isinstance(record, dict) and "step" in record else None


def read_records(path: Path) -> list[Record]:
    """Every parseable record in file order; an undecodable last line is a write cut short by a kill."""
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    records: list[Record] = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            if i != len(lines) - 1:
                warnings.warn(f"{path}:{i + 1}: skipping an unreadable line", RuntimeWarning, stacklevel=3)
            continue
        if isinstance(record, dict) and "step" in record:
            records.append(record)
    return records


def drop_partial_last_line(path: Path) -> None:
    """Cut a line a killed process left without its newline, so the next append starts a fresh line."""
    if not path.exists():
        return
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return
    keep = data.rfind(b"\n") + 1
    try:
        json.loads(data[keep:])
    except ValueError:
        os.truncate(path, keep)
    else:
        with path.open("ab") as f:  # a whole record that only lacks its newline
            f.write(b"\n")
