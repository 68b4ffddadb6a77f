"""The end-of-run summary behind `agentrl report RUN_DIR`: draws the run's plots and describes the run in a
few lines (steps, wall time, held-out success first/last/best, last train reward, mean step time, plot paths).
"""

from __future__ import annotations

import math
from pathlib import Path

from agentrl.runlog.metrics_file import METRICS_FILE, Record, read_metrics, series
from agentrl.runlog.plots import EVAL_KEY, plot_run


def report(run_dir: str | Path) -> str:
    """Draw the run's plots and return its summary as plain text (no colour codes, so it pipes cleanly)."""
    run_dir = Path(run_dir)
    if not (run_dir / METRICS_FILE).exists():
        raise FileNotFoundError(f"{run_dir} has no {METRICS_FILE}; is it a run directory?")
    records = read_metrics(run_dir)
    plots = plot_run(run_dir)
    return _render(f"run {run_dir}", summary_rows(records) + [("plot", str(p)) for p in plots])


def summary_rows(records: list[Record]) -> list[tuple[str, str]]:
    """(label, value) pairs describing a run's records; an empty run says so."""
    if not records:
        return [("steps", "none logged yet")]
    last = records[-1]
    rows = [("steps", str(int(last["step"]))), ("wall time", _duration(float(last.get("wall_s", 0.0))))]
    steps, success = series(records, EVAL_KEY)
    if success:
        best = max(range(len(success)), key=lambda i: success[i])
        rows += [
            ("held-out success (first)", _at(success[0], steps[0])),
            ("held-out success (last)", _at(success[-1], steps[-1])),
            ("held-out success (best)", _at(success[best], steps[best])),
        ]
    rows += _per_scaffold_rows(records)
    reward_steps, reward = series(records, "reward/mean")
    if reward:
        rows.append(("train reward (last)", _at(reward[-1], reward_steps[-1])))
    step_s = _mean_step_s(records)
    if step_s is not None:
        rows.append(("mean step time", _duration(step_s)))
    return rows


def _per_scaffold_rows(records: list[Record]) -> list[tuple[str, str]]:
    names = sorted({k for r in records for k in r if k.startswith(EVAL_KEY + "/")})
    rows = []
    for key in names:
        steps, values = series(records, key)
        if values:
            rows.append((f"held-out success, {key.removeprefix(EVAL_KEY + '/')} (last)", _at(values[-1], steps[-1])))
    return rows


def _mean_step_s(records: list[Record]) -> float | None:
    """Mean of the logged step times; without them, wall time over training steps (evaluation included)."""
    _, times = series(records, "time/step_s")
    if times:
        return sum(times) / len(times)
    steps = int(records[-1]["step"])
    wall_s = float(records[-1].get("wall_s", math.nan))
    return wall_s / steps if steps > 0 and math.isfinite(wall_s) else None


def _at(value: float, step: float) -> str:
    return f"{value:.3f} (step {int(step)})"


def _duration(seconds: float) -> str:
    """`3.2s`, `4m 05s`, `1h 02m 03s`."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m {secs:02d}s"


def _render(title: str, rows: list[tuple[str, str]]) -> str:
    """Aligned `label  value` lines under the title; values are never wrapped, so paths stay copyable."""
    width = max(len(label) for label, _ in rows)
    return "\n".join([title, *(f"  {label:<{width}}  {value}" for label, value in rows)])
