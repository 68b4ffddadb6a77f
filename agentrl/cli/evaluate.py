"""`agentrl eval`: a scaffold against an OpenAI-compatible endpoint or a local checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agentrl.cli.train import MODEL_HELP

eval_app = typer.Typer()


@eval_app.command("eval")
def eval_command(
    overrides: Annotated[list[str] | None, typer.Argument(help="EvalRunConfig overrides: key=value …")] = None,
    scaffold: Annotated[str, typer.Option(help="Scaffold name or import path.")] = "code",
    model: Annotated[str, typer.Option(help="Model at the endpoint, or " + MODEL_HELP)] = "tiny",
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible base URL; none = in-process.")] = None,
    api_key: Annotated[str | None, typer.Option(help="API key (default $OPENAI_API_KEY).")] = None,
    samples: Annotated[int, typer.Option(help="Samples per task (pass@k up to this).")] = 1,
    tasks: Annotated[
        str | None, typer.Option(help="Tasks (file, directory, dataset id, recording) instead of bundled ones.")
    ] = None,
    output: Annotated[
        Path | None, typer.Option(help="Results JSONL (reruns with the same settings resume it).")
    ] = None,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Start the results file over (its results had other settings).")
    ] = False,
) -> None:
    """Evaluate a scaffold against an OpenAI-compatible endpoint or a local checkpoint: pass@k, turns, tokens,
    infrastructure failures (exit code 1 when every episode was one)."""
    from agentrl.config import EvalRunConfig, load_config
    from agentrl.eval.runner import run_eval

    extra = list(overrides or []) + [f"scaffold={scaffold}", f"model={model}", f"samples_per_task={samples}"]
    extra += [f"base_url={base_url}"] if base_url else []
    extra += [f"api_key={api_key}"] if api_key else []
    extra += [f"tasks={tasks}"] if tasks else []
    extra += [f"output={output}"] if output else []
    extra += ["overwrite=true"] if overwrite else []
    outcome = run_eval(load_config(None, extra, cls=EvalRunConfig))
    typer.echo(outcome.text)
    typer.echo("wrote " + ", ".join(str(p) for p in outcome.written))
    outcome.require_valid()  # every episode an infrastructure failure: exit 1 with the first error, not a score
