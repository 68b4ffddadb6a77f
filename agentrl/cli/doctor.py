"""`agentrl doctor`: check a model's chat template, tool-call format, end-of-turn ids and sampler agreement."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agentrl.cli.train import MODEL_HELP, TOOL_PARSER_HELP

doctor_app = typer.Typer()


@doctor_app.command()
def doctor(
    model: Annotated[str, typer.Option(help=MODEL_HELP)] = "tiny",
    tool_parser: Annotated[str, typer.Option(help=TOOL_PARSER_HELP)] = "auto",
    chat_template: Annotated[Path | None, typer.Option(help="A Jinja chat template file to use instead.")] = None,
    thinking: Annotated[bool | None, typer.Option("--thinking/--no-thinking", help="Pass enable_thinking.")] = None,
    fast: Annotated[bool, typer.Option(help="Only the checks that need no weights.")] = False,
    tools: Annotated[
        str | None,
        typer.Option(
            help="Toolsets a run would offer (comma-separated names or import paths): can the model see them?"
        ),
    ] = None,
) -> None:
    """Check a model before training it: template, tool calls and their markup, end of turn, reasoning, token
    exactness, and the sampler–learner log-prob gap of a short sampled episode. Exits 1 when a check fails."""
    from agentrl.doctor.model_doctor import doctor as run_doctor
    from agentrl.doctor.verdicts import failed, table
    from agentrl.policy.config import PolicyConfig

    config = PolicyConfig(
        model=model,
        tool_parser=tool_parser,
        chat_template=str(chat_template) if chat_template else None,
        enable_thinking=thinking,
    )
    schemas = []
    if tools:
        from agentrl.registry import TOOLSETS
        from agentrl.toolserver.toolsets import resolve_toolsets

        specs = [TOOLSETS.get(t.strip(), t.strip()) for t in tools.split(",") if t.strip()]
        schemas = [tool.schema for toolset in resolve_toolsets(specs) for tool in toolset.tools.values()]
    verdicts = run_doctor(config, fast=fast, tools=schemas)
    typer.echo(table(verdicts))
    if failed(verdicts):
        raise typer.Exit(1)
