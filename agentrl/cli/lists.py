"""`agentrl tools list` and `agentrl scaffolds list`: what ships."""

from __future__ import annotations

import typer

tools_app = typer.Typer(help="Inspect tools.", no_args_is_help=True)
scaffolds_app = typer.Typer(help="Inspect scaffolds.", no_args_is_help=True)


@tools_app.command("list")
def tools_list() -> None:
    """List the built-in toolsets and their tools."""
    from agentrl.registry import TOOLSETS, import_path
    from agentrl.tool import collect_tools

    for short, path in TOOLSETS.items():
        for t in collect_tools(import_path(path)):
            typer.echo(f"{short:12s} {t.name:16s} {t.description.splitlines()[0] if t.description else ''}")


@scaffolds_app.command("list")
def scaffolds_list() -> None:
    """List the built-in scaffolds."""
    from agentrl.registry import SCAFFOLDS, import_path

    for short, path in SCAFFOLDS.items():
        doc = (import_path(path).__doc__ or "").strip().splitlines()
        typer.echo(f"{short:10s} {doc[0] if doc else ''}")
