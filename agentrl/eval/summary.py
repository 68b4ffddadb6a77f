"""What `agentrl eval` prints and draws: pass@k, turns, tool calls, tokens, latency, throughput.

Infrastructure failures are counted but never scored: success and a task's pass@k use only its finished samples,
so an endpoint outage cannot pass for a wrong answer, and the failures stand next to them (per scaffold, too, when
the tasks mix several: `agentrl.eval.outcomes`). With no finished episode there is no success to show (`-`).
The plot (drawn on matplotlib's Agg canvas, no display needed) shows pass@k against k and the distribution of
episode latencies.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentrl.eval.outcomes import Outcome, heldout_metrics, scaffolds_of
from agentrl.eval.passk import k_values, mean_pass_at_k
from agentrl.eval.results import EvalRecord

PER_SCAFFOLD = ("episodes", "infra_errors", "success")
"""What the summary repeats for each scaffold of a mixture."""


def summarize(records: Sequence[EvalRecord], *, wall_s: float | None = None, episodes_run: int = 0) -> dict[str, Any]:
    """Summary statistics of finished records, with the infrastructure failures next to success and pass@k
    (`wall_s`, `episodes_run`: this invocation, for throughput). Success and the means are None without a
    finished record."""
    done = [r for r in records if r.finished]
    per_task: dict[str, list[bool]] = defaultdict(list)
    for r in done:
        per_task[r.task_id].append(r.success)
    counts = [(len(v), sum(v)) for v in per_task.values()]
    samples = min((n for n, _ in counts), default=0)
    latencies = sorted(r.latency_s for r in done)
    outcomes = [Outcome.of_record(r) for r in records]
    heldout = heldout_metrics(outcomes)
    names = scaffolds_of(outcomes) if len(scaffolds_of(outcomes)) > 1 else []
    out: dict[str, Any] = {
        "tasks": len(per_task),
        "episodes": len(done),
        "infra_errors": len(records) - len(done),
        "success": heldout.get("success"),
        **{f"pass@{k}": mean_pass_at_k(counts, k) for k in (k_values(samples) if samples else [])},
        **{f"{key}/{name}": heldout.get(f"{key}/{name}") for name in names for key in PER_SCAFFOLD},
        "turns": _mean([r.turns for r in done]),
        "tool_calls": _mean([r.tool_calls for r in done]),
        "prompt_tokens": _mean([r.prompt_tokens for r in done]),
        "completion_tokens": _mean([r.completion_tokens for r in done]),
        "latency_p50_s": statistics.median(latencies) if latencies else None,
        "latency_p95_s": latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))] if latencies else None,
        "stop_reasons": dict(Counter(r.stop_reason for r in records)),
    }
    if wall_s and episodes_run:
        out["episodes_per_min"] = 60.0 * episodes_run / wall_s
    return out


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def table(summary: dict[str, Any], title: str) -> str:
    """The summary as aligned plain-text rows."""
    rows = []
    for key, value in summary.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k} {v}" for k, v in sorted(value.items()))
        elif isinstance(value, float):
            value = f"{value:.3f}"
        elif value is None:
            value = "-"
        rows.append((key, str(value)))
    width = max(len(k) for k, _ in rows)
    return "\n".join([title] + [f"  {k.ljust(width)}  {v}" for k, v in rows])


def write_summary(records: Sequence[EvalRecord], summary: dict[str, Any], results_path: Path) -> list[Path]:
    """`<results>.summary.json` and `<results>.png` beside the results file; returns the paths."""
    json_path = results_path.with_suffix(".summary.json")
    json_path.write_text(json.dumps(summary, indent=2) + "\n")
    return [json_path, _plot(records, summary, results_path.with_suffix(".png"))]


def _plot(records: Sequence[EvalRecord], summary: dict[str, Any], path: Path) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(9, 3.5), layout="constrained")
    FigureCanvasAgg(figure)
    by_k, latency = figure.subplots(1, 2)
    ks = [int(key.split("@")[1]) for key in summary if key.startswith("pass@")]
    by_k.plot(ks, [summary[f"pass@{k}"] for k in ks], marker="o")
    by_k.set(
        xlabel="k",
        ylabel="pass@k",
        ylim=(0, 1.02),
        xscale="log" if len(ks) > 2 else "linear",
        title=f"{summary['tasks']} tasks",
    )
    by_k.set_xticks(ks, [str(k) for k in ks])
    latency.hist([r.latency_s for r in records if r.finished], bins=20)
    latency.set(xlabel="episode latency (s)", ylabel="episodes", title="latency")
    for ax in (by_k, latency):
        ax.grid(alpha=0.3)
    figure.savefig(path, dpi=110)
    return path
