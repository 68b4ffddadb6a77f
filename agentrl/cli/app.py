"""The `agentrl` command: the command families merged into one app, and one-line errors.

Every command runs inside `Commands.invoke`, which turns what a command raises into one line on stderr (what
failed and, in the message, what to do) and an exit code: 2 for a bad setting, input or missing dependency, 1 for
an infrastructure failure or anything unexpected. `agentrl --debug …` (or `AGENTRL_DEBUG=1`) lets the
traceback through instead.
"""

from __future__ import annotations

import contextlib
import faulthandler
import io
import os
from typing import Annotated

import click
import typer
from typer.core import TyperGroup

from agentrl.cli.bench import bench_app
from agentrl.cli.doctor import doctor_app
from agentrl.cli.evaluate import eval_app
from agentrl.cli.hub import hub_app
from agentrl.cli.lists import scaffolds_app, tools_app
from agentrl.cli.serve import serve_app
from agentrl.cli.swe import swe_app
from agentrl.cli.train import train_app
from agentrl.cli.view import view_app
from agentrl.errors import AgentRLError, ConfigError, DependencyError, InputError, one_line

USER_ERRORS = (ConfigError, InputError, DependencyError, OSError)
"""Errors the user can fix (a setting, a file, an installation): exit code 2."""


class Commands(TyperGroup):
    """The root command group: runs a command and reports what it raised as one line."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise  # typer's own exits and usage errors print themselves
        except KeyboardInterrupt:
            raise typer.Exit(130) from None
        except Exception as e:
            if ctx.params.get("debug") or os.environ.get("AGENTRL_DEBUG"):
                raise
            typer.secho(f"error: {describe(e)}", fg="red", err=True)
            raise typer.Exit(2 if isinstance(e, USER_ERRORS) else 1) from None


def describe(error: BaseException) -> str:
    """The line the command line prints for `error`."""
    if isinstance(error, (AgentRLError, OSError)):
        return one_line(error)
    return f"unexpected {type(error).__name__}: {one_line(error)} (run `agentrl --debug …` for the traceback)"


app = typer.Typer(
    cls=Commands,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Train tool-using LLM agents with RL.",
)


@app.callback()
def root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks instead of one-line errors.")] = False,
) -> None:
    """Train tool-using LLM agents with RL."""


for family in (train_app, eval_app, serve_app, doctor_app, hub_app, view_app):
    app.add_typer(family)
app.add_typer(tools_app, name="tools")
app.add_typer(scaffolds_app, name="scaffolds")
app.add_typer(bench_app, name="bench")
app.add_typer(swe_app, name="swe")


def main() -> None:
    # A crash below Python (a segfault or abort in torch, a collective, a tokenizer) would end the process, or a
    # rank of a multi-process run, with a bare signal; this prints every thread's Python stack first.
    with contextlib.suppress(AttributeError, ValueError, RuntimeError, io.UnsupportedOperation):
        faulthandler.enable(all_threads=True)  # not where stderr has no file descriptor
    app()


if __name__ == "__main__":
    main()
