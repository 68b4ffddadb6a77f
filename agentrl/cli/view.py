"""`agentrl view`: a run directory in the browser."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

view_app = typer.Typer()


@view_app.command()
def view(
    run_dir: Annotated[Path, typer.Argument(help="The run directory (runs/<name>).")],
    port: Annotated[int, typer.Option(help="Port (0: any free one).")] = 8765,
    host: Annotated[str, typer.Option(help="Bind address; loopback by default: the page shows the whole run.")] = (
        "127.0.0.1"
    ),
) -> None:
    """Look at a run in the browser: steps on a timeline with the metric curves, each step's groups and
    trajectories (filter, search), one trajectory turn by turn with its tokens coloured by advantage or by the
    sampler–learner log-prob gap, branch trees, and a task at two steps side by side. Read-only; follows a run
    while it writes."""
    from agentrl.view.app import serve

    serve(run_dir, host=host, port=port, announce=lambda url: typer.echo(f"viewing {run_dir} at {url} (Ctrl-C stops)"))
