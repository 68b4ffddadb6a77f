"""`agentrl swe …`: grade SWE-bench predictions and synthesize SWE training tasks."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

swe_app = typer.Typer(
    help="SWE tasks: grade predictions the way the SWE-bench harness does; synthesize training tasks.",
    no_args_is_help=True,
)


@swe_app.command("grade")
def swe_grade(
    predictions: Annotated[Path, typer.Option(help="JSONL of {instance_id, model_patch} (SWE-bench format).")],
    tasks: Annotated[Path | None, typer.Option(help="SWE-bench JSONL/Parquet tasks; default: bundled ones.")] = None,
    repos_dir: Annotated[Path | None, typer.Option(help="Local clones `<owner>__<name>` or tarballs.")] = None,
    out: Annotated[Path | None, typer.Option(help="Per-instance results JSONL (default: beside predictions).")] = None,
    concurrency: Annotated[int, typer.Option(help="Sandboxes grading at once.")] = 4,
    test_timeout_s: Annotated[float, typer.Option(help="Time limit of one instance's test run.")] = 60.0,
) -> None:
    """Grade predictions in fresh sandboxes; write per-instance results and a summary."""
    import json

    from agentrl.scaffolds.swe.cli import grade_predictions

    options = dict(tasks=tasks, repos_dir=repos_dir, out=out, concurrency=concurrency)
    summary, path = grade_predictions(predictions, test_timeout_s=test_timeout_s, **options)
    typer.echo(json.dumps(summary, indent=2))
    typer.echo(f"results: {path}")


@swe_app.command("synth")
def swe_synth(
    out: Annotated[Path, typer.Option(help="Directory to write tasks.jsonl and repos/ into.")],
    tasks: Annotated[Path | None, typer.Option(help="SWE-bench JSONL/Parquet tasks; default: bundled ones.")] = None,
    repos_dir: Annotated[Path | None, typer.Option(help="Local clones `<owner>__<name>` or tarballs.")] = None,
    per_task: Annotated[int, typer.Option(help="Most tasks made from each training task.")] = 8,
    seed: Annotated[int, typer.Option(help="Seed of the order bugs are tried in.")] = 0,
    keep_sources: Annotated[bool, typer.Option(help="Also write the source training tasks.")] = True,
    concurrency: Annotated[int, typer.Option(help="Sandboxes grading at once.")] = 2,
) -> None:
    """Make easy training tasks by injecting one-token bugs into the training repositories' fixed code (kept
    only when a test catches them); held-out tasks are copied through. Train on the result with
    AGENTRL_SWE_TASKS=<out>/tasks.jsonl AGENTRL_SWE_REPOS_DIR=<out>/repos agentrl train --scaffold swe."""
    from agentrl.scaffolds.swe.cli import synthesize_tasks

    report = synthesize_tasks(
        out,
        tasks=tasks,
        repos_dir=repos_dir,
        per_task=per_task,
        seed=seed,
        keep_sources=keep_sources,
        concurrency=concurrency,
    )
    made = sum(report.synthesized.values())
    typer.echo(
        f"{made} tasks made from {len(report.synthesized)} training tasks ({report.candidates} bugs graded); "
        f"{report.copied} source tasks copied"
    )
    typer.echo(f"tasks: {report.tasks_file}\nrepos: {report.repos_dir}")
