"""`agentrl swe grade`: grade SWE-bench-style predictions on local tasks, as the SWE-bench harness does; and
`agentrl swe synth`: more easy training tasks from a task set's training repositories (`synthesis`).

Predictions are JSONL rows (or one JSON list) with `instance_id` and `model_patch` (and optionally
`model_name_or_path`), the format SWE-bench uses. Results: one JSON line per prediction (resolved, status, each
graded test's outcome, seconds) and a summary (`<out>.summary.json`): resolved rate, counts per status and per
tier, and grading seconds per instance.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

from agentrl.scaffolds.swe import bundled
from agentrl.scaffolds.swe.grading import TEST_TIMEOUT_S, GradeResult, grade_many
from agentrl.scaffolds.swe.instances import SweInstance, load_instances, read_json_rows
from agentrl.scaffolds.swe.synthesis import SynthesisReport, synthesize

from agentrl.errors import ConfigError, InputError


def task_source(tasks: str | Path | None, repos_dir: str | Path | None) -> tuple[list[SweInstance], str]:
    """The instances of a task file (default: the bundled tasks) and the directory holding their repositories."""
    is_bundled = tasks is None or Path(tasks).resolve() == bundled.TASKS_FILE.resolve()
    if repos_dir is None and not is_bundled:
        raise ConfigError("--repos-dir is needed for tasks other than the bundled ones (nothing is downloaded)")
    return load_instances(tasks or bundled.TASKS_FILE), str(repos_dir or bundled.repos_dir())


def load_predictions(path: str | Path) -> list[dict[str, Any]]:
    rows = read_json_rows(path)
    for row in rows:
        if "instance_id" not in row or "model_patch" not in row:
            raise InputError(f"{path}: every prediction needs instance_id and model_patch, got keys {sorted(row)}")
    return rows


def grade_predictions(
    predictions: str | Path,
    *,
    tasks: str | Path | None = None,
    repos_dir: str | Path | None = None,
    out: str | Path | None = None,
    concurrency: int = 4,
    test_timeout_s: float = TEST_TIMEOUT_S,
) -> tuple[dict[str, Any], Path]:
    """Grade every prediction; write the per-instance results and the summary; return (summary, results path)."""
    found, repos = task_source(tasks, repos_dir)
    instances = {i.instance_id: i for i in found}
    rows = load_predictions(predictions)
    unknown = [r["instance_id"] for r in rows if r["instance_id"] not in instances]
    if unknown:
        raise InputError(f"predictions for unknown instances: {', '.join(unknown[:5])}")
    jobs = [(instances[r["instance_id"]], r["model_patch"] or "") for r in rows]
    results = asyncio.run(grade_many(jobs, repos, concurrency=concurrency, test_timeout_s=test_timeout_s))
    out_path = Path(out) if out else Path(predictions).with_suffix(".results.jsonl")
    with out_path.open("w") as f:
        for row, result in zip(rows, results, strict=True):
            f.write(json.dumps({**result.to_json(), "model_name_or_path": row.get("model_name_or_path")}) + "\n")
    summary = summarize([i for i, _ in jobs], results)
    out_path.with_suffix(".summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary, out_path


def synthesize_tasks(
    out: str | Path,
    *,
    tasks: str | Path | None = None,
    repos_dir: str | Path | None = None,
    **options: Any,
) -> SynthesisReport:
    """`synthesis.synthesize` over a task file (default: the bundled tasks)."""
    instances, repos = task_source(tasks, repos_dir)
    return synthesize(instances, repos, out, **options)


def summarize(instances: list[SweInstance], results: list[GradeResult]) -> dict[str, Any]:
    graded = [r for r in results if not r.infra_failure]
    tiers: dict[str, list[int]] = {}
    for instance, result in zip(instances, results, strict=True):
        counts = tiers.setdefault(instance.tier or "unknown", [0, 0])
        counts[0] += int(result.resolved)
        counts[1] += 1
    ran = [r.elapsed_s for r in results if r.status != "empty_patch"]
    return {
        "instances": len(results),
        "resolved": sum(r.resolved for r in results),
        "resolved_rate": sum(r.resolved for r in graded) / max(len(graded), 1),
        "infra_errors": len(results) - len(graded),
        "by_status": dict(Counter(r.status for r in results)),
        "by_tier": {tier: {"resolved": n, "instances": total} for tier, (n, total) in sorted(tiers.items())},
        "grade_s_mean": sum(ran) / len(ran) if ran else 0.0,
        "grade_s_max": max(ran, default=0.0),
    }
