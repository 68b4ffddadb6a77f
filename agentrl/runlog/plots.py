"""Plots of a run's `metrics.jsonl`, written as PNG files under `run_dir/plots/`.

- `plot_run(run_dir)`: `reward.png` (train reward and success per step) and `heldout_success.png` (held-out
  success against step and against wall minutes, one line per scaffold when several are evaluated).
- `compare_runs(run_dirs, out_path)`: one metric of several runs on shared axes, for side-by-side comparisons.

Figures are drawn on matplotlib's Agg canvas directly rather than through pyplot, so plotting never switches
the backend of a process that already uses matplotlib (a notebook, say) and needs no display.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrl.runlog.metrics_file import Record, read_metrics, series

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

PLOTS_DIR = "plots"
DPI = 120
EVAL_KEY = "eval/success"
TRAIN_KEYS = {"reward/mean": "reward", "success/mean": "success"}
TRAIN_STYLES = {"reward/mean": {"linestyle": "-"}, "success/mean": {"linestyle": "--", "marker_face": "none"}}
"""Reward and success coincide whenever the reward is the success (exact match): one solid, one dashed with hollow
markers, so the line drawn second never hides the first."""


def plot_run(run_dir: str | Path) -> list[Path]:
    """Draw the run's plots; returns the paths written (a plot whose series are all absent is skipped)."""
    run_dir = Path(run_dir)
    records = read_metrics(run_dir)
    out_dir = run_dir / PLOTS_DIR
    written = []
    for draw, name in ((_draw_train, "reward.png"), (_draw_heldout, "heldout_success.png")):
        figure = draw(records, run_dir.name)
        if figure is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
            written.append(_save(figure, out_dir / name))
    return written


def compare_runs(run_dirs: Sequence[str | Path], out_path: str | Path, key: str = EVAL_KEY) -> Path:
    """Plot `key` of every run against step and against wall minutes, one line per run; returns `out_path`."""
    curves = [(Path(d).name, read_metrics(d)) for d in run_dirs]
    curves = [(name, records) for name, records in curves if series(records, key)[0]]
    if not curves:
        raise ValueError(f"none of the runs logged {key!r}")
    figure, (by_step, by_time) = _figure(ncols=2)
    for name, records in curves:
        _line(by_step, records, key, "step", name)
        _line(by_time, records, key, "wall_min", name)
    _style(by_step, "step", key)
    _style(by_time, "wall time (min)", key)
    figure.suptitle(f"{key}: {', '.join(name for name, _ in curves)}")
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    return _save(figure, out_path)


def _draw_train(records: list[Record], title: str) -> Figure | None:
    present = [k for k in TRAIN_KEYS if series(records, k)[0]]
    if not present:
        return None
    figure, (ax,) = _figure(ncols=1)
    for key in present:
        _line(ax, records, key, "step", TRAIN_KEYS[key], **TRAIN_STYLES[key])
    _style(ax, "step", "train reward / success")
    figure.suptitle(f"{title}: training rollouts")
    return figure


def _draw_heldout(records: list[Record], title: str) -> Figure | None:
    keys = [k for k in _eval_keys(records) if series(records, k)[0]]
    if not keys:
        return None
    figure, (by_step, by_time) = _figure(ncols=2)
    for key in keys:
        label = "all" if key == EVAL_KEY else key.removeprefix(EVAL_KEY + "/")
        # The overall curve is drawn heavier so per-scaffold lines read as its breakdown.
        width = 2.2 if key == EVAL_KEY else 1.3
        _line(by_step, records, key, "step", label, linewidth=width)
        _line(by_time, records, key, "wall_min", label, linewidth=width)
    _style(by_step, "step", "held-out success")
    _style(by_time, "wall time (min)", "held-out success")
    figure.suptitle(f"{title}: held-out success")
    return figure


def _eval_keys(records: list[Record]) -> list[str]:
    """`eval/success` first, then every `eval/success/<scaffold>` in name order."""
    per_scaffold = sorted({k for r in records for k in r if k.startswith(EVAL_KEY + "/")})
    return [EVAL_KEY, *per_scaffold]


def _line(ax: Axes, records: list[Record], key: str, x: str, label: str, **style: Any) -> None:
    if x == "wall_min":
        xs, ys = series(records, key, "wall_s")
        xs = [s / 60 for s in xs]
    else:
        xs, ys = series(records, key, x)
    # Markers keep short runs (a handful of eval points) legible; long curves read better as plain lines.
    marker = "o" if len(xs) <= 30 else None
    face = style.pop("marker_face", None)
    if face is not None:
        style["markerfacecolor"] = face
    ax.plot(xs, ys, label=label, marker=marker, markersize=3.5 if face is None else 5.0, **style)


def _style(ax: Axes, xlabel: str, ylabel: str) -> None:
    if xlabel == "step":  # steps are whole: no ticks at 0.25 of a step in a short run
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize="small", frameon=False)


def _figure(ncols: int) -> tuple[Figure, list[Axes]]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(5.5 * ncols, 4.0), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(1, ncols, squeeze=False)[0]
    return figure, list(axes)


def _save(figure: Figure, path: Path) -> Path:
    figure.savefig(path, dpi=DPI)
    return path
