"""The `agentrl` command line (typer). Every training option is a config field: `-c run.toml key.sub=value`."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from agentrl.cli.bench import bench_app
from agentrl.cli.swe import swe_app

MODEL_HELP = "`tiny`, `tiny-extended`, `tiny-swe`, a checkpoint path, or a cached hub id."
app = typer.Typer(add_completion=False, no_args_is_help=True, help="Train tool-using LLM agents with RL.")
tools_app = typer.Typer(help="Inspect tools.", no_args_is_help=True)
scaffolds_app = typer.Typer(help="Inspect scaffolds.", no_args_is_help=True)
app.add_typer(tools_app, name="tools")
app.add_typer(scaffolds_app, name="scaffolds")
app.add_typer(bench_app, name="bench")
app.add_typer(swe_app, name="swe")


def _config_help() -> str:
    from agentrl.config import RunConfig, field_docs

    return "\n".join(f"  {name} = {default}\n      {doc}" for name, default, doc in field_docs(RunConfig))


@app.command(context_settings={"help_option_names": ["-h", "--help"]})
def train(
    overrides: Annotated[list[str] | None, typer.Argument(help="Config overrides: key.sub=value …")] = None,
    scaffold: Annotated[str | None, typer.Option(help="Scaffold name or import path (`a+b` mixes).")] = None,
    model: Annotated[str | None, typer.Option(help=MODEL_HELP)] = None,
    config: Annotated[Path | None, typer.Option("-c", "--config", help="TOML config file.")] = None,
    resume: Annotated[Path | None, typer.Option(help="Resume the run in this directory.")] = None,
    name: Annotated[str | None, typer.Option(help="Run name (directory under output_dir).")] = None,
    help_config: Annotated[bool, typer.Option("--help-config", help="List every config field and exit.")] = False,
) -> None:
    """Train a policy with RL. With no arguments: the shipped tiny policy on the bundled code+search tasks."""
    from agentrl.config import ConfigError, load_config

    if help_config:
        typer.echo(_config_help())
        raise typer.Exit()
    extra = list(overrides or [])
    extra += [f"scaffold={scaffold}"] if scaffold else []
    extra += [f"policy.model={model}"] if model else []
    extra += [f"name={name}"] if name else []
    try:
        from agentrl.trainer import Trainer

        if resume is not None:
            if not (resume / "config.toml").exists():
                raise ConfigError(f"{resume} is not a run directory (no config.toml)")
            trainer = Trainer.from_run_dir(resume, extra)
        else:
            cfg = load_config(config, extra)
            run_dir = Path(cfg.output_dir) / (cfg.name or time.strftime("%Y%m%d-%H%M%S"))
            if (run_dir / "checkpoints").exists():
                raise ConfigError(f"{run_dir} already holds a run; use --resume {run_dir} or another --name")
            run_dir.mkdir(parents=True, exist_ok=True)
            trainer = Trainer(cfg, run_dir)
    except (ConfigError, FileNotFoundError, KeyError, ImportError) as e:
        typer.secho(f"error: {e}", fg="red", err=True)
        raise typer.Exit(2) from e
    typer.echo(f"run directory: {trainer.run_dir}")
    trainer.run()
    from agentrl.runlog.report import report

    typer.echo(report(trainer.run_dir))


@app.command("serve-tools")
def serve_tools(
    tools: Annotated[str, typer.Option(help="Comma-separated toolset names or import paths.")] = "echo",
    host: Annotated[str, typer.Option(help="Bind address (loopback by default).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (the first one with --replicas).")] = 8000,
    token: Annotated[
        str | None,
        typer.Option(envvar="AGENTRL_TOOL_SERVER_TOKEN", help="Require `Authorization: Bearer TOKEN`."),
    ] = None,
    replicas: Annotated[
        int,
        typer.Option(
            min=1,
            help="Start this many server processes on consecutive ports and print their URLs (give them all to "
            "the client: `tool_servers=URL,URL`). Not one port with several workers: session state lives in "
            "one process, and workers sharing a port could not keep a session's requests on it.",
        ),
    ] = 1,
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", help="TOML file of server limits and sandbox settings (ToolServerConfig)."),
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="Override one setting, repeatable: `max_sessions=512`, `sandbox.memory_mb=4096`, "
            "`sandbox.allow_network=true`, `sandbox.backend=e2b` (see `agentrl serve-tools --settings`).",
        ),
    ] = None,
    settings: Annotated[bool, typer.Option("--settings", help="List every setting with its default and exit.")] = False,
) -> None:
    """Serve toolsets over the agentrl tool-server HTTP API."""
    from agentrl.config import ConfigError, field_docs, load_config
    from agentrl.registry import TOOLSETS
    from agentrl.toolserver.app import serve
    from agentrl.toolserver.config import ToolServerConfig

    if settings:
        for key, default, doc in field_docs(ToolServerConfig):
            typer.echo(f"{key} = {default}\n    {doc}")
        return
    overrides = list(set_ or [])
    try:
        server_config = load_config(config, overrides, cls=ToolServerConfig)
    except (ConfigError, FileNotFoundError) as e:
        typer.secho(f"error: {e}", fg="red", err=True)
        raise typer.Exit(2) from e
    if replicas > 1:
        _serve_tool_replicas(
            tools, host=host, port=port, token=token, replicas=replicas, config=config, overrides=overrides
        )
        return
    specs = [TOOLSETS.get(t.strip(), t.strip()) for t in tools.split(",") if t.strip()]
    serve(specs, host=host, port=port, token=token, config=server_config)


def _serve_tool_replicas(
    tools: str,
    *,
    host: str,
    port: int,
    token: str | None,
    replicas: int,
    config: Path | None,
    overrides: list[str],
) -> None:
    import signal

    from agentrl.toolserver.replicas import ToolServerReplicas

    def stop_on_sigterm(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop_on_sigterm)
    servers = ToolServerReplicas(
        tools, replicas=replicas, host=host, port=port, token=token, config=config, overrides=overrides
    )
    try:
        for url, process in zip(servers.start(), servers.processes, strict=True):
            typer.echo(f"tool server {url} (pid {process.pid})")
        typer.echo(f"tool_servers={','.join(servers.urls)}")
        code = servers.wait()
    except (RuntimeError, TimeoutError) as e:  # a replica did not start (port taken, bad toolset, ...)
        typer.secho(f"error: {e}", fg="red", err=True)
        code = 2
    except KeyboardInterrupt:
        code = 0
    finally:
        servers.stop()
    raise typer.Exit(code)


@app.command()
def report(run_dir: Annotated[Path, typer.Argument(help="A run directory.")]) -> None:
    """Draw a run's plots and print its summary."""
    from agentrl.runlog.report import report as make_report

    typer.echo(make_report(run_dir))


@app.command()
def sft(
    data: Annotated[Path, typer.Option(help='JSONL of conversations: {"messages": [...], "tools": [...]}')],
    output: Annotated[Path, typer.Option(help="Where to save the fine-tuned model.")],
    model: Annotated[str, typer.Option(help=MODEL_HELP)] = "tiny",
    epochs: Annotated[float, typer.Option(help="Passes over the data.")] = 1.0,
    lr: Annotated[float, typer.Option(help="Learning rate.")] = 1e-4,
) -> None:
    """Supervised fine-tuning on tool-use conversations (trl SFTTrainer, assistant-only loss)."""
    import json

    from agentrl.config import PolicyConfig
    from agentrl.policy import load_model_and_tokenizer
    from agentrl.train.sft import SFTSettings, run_sft

    conversations = [json.loads(line) for line in data.read_text().splitlines() if line.strip()]
    model_obj, tokenizer = load_model_and_tokenizer(PolicyConfig(model=model))
    import torch

    settings = SFTSettings(epochs=epochs, lr=lr, use_cpu=not torch.cuda.is_available())
    metrics = run_sft(model_obj, tokenizer, conversations, output_dir=str(output), settings=settings)
    model_obj.save_pretrained(output)
    tokenizer.save_pretrained(output)
    typer.echo(f"saved to {output}: {metrics}")


@app.command("eval")
def eval_command(
    overrides: Annotated[list[str] | None, typer.Argument(help="EvalRunConfig overrides: key=value …")] = None,
    scaffold: Annotated[str, typer.Option(help="Scaffold name or import path.")] = "code",
    model: Annotated[str, typer.Option(help="Model at the endpoint, or " + MODEL_HELP)] = "tiny",
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible base URL; none = in-process.")] = None,
    api_key: Annotated[str | None, typer.Option(help="API key (default $OPENAI_API_KEY).")] = None,
    samples: Annotated[int, typer.Option(help="Samples per task (pass@k up to this).")] = 1,
    tasks: Annotated[Path | None, typer.Option(help="Task file (JSONL/Parquet) instead of bundled tasks.")] = None,
    output: Annotated[Path | None, typer.Option(help="Results JSONL (reruns resume from it).")] = None,
) -> None:
    """Evaluate a scaffold against an OpenAI-compatible endpoint or a local checkpoint: pass@k, turns, tokens."""
    from agentrl.config import ConfigError, EvalRunConfig, load_config
    from agentrl.eval.runner import run_eval

    extra = list(overrides or []) + [f"scaffold={scaffold}", f"model={model}", f"samples_per_task={samples}"]
    extra += [f"base_url={base_url}"] if base_url else []
    extra += [f"api_key={api_key}"] if api_key else []
    extra += [f"tasks={tasks}"] if tasks else []
    extra += [f"output={output}"] if output else []
    try:
        cfg = load_config(None, extra, cls=EvalRunConfig)
        outcome = run_eval(cfg)
    except (ConfigError, FileNotFoundError, KeyError, ImportError, ValueError) as e:
        typer.secho(f"error: {e}", fg="red", err=True)
        raise typer.Exit(2) from e
    typer.echo(outcome.text)
    typer.echo("wrote " + ", ".join(str(p) for p in outcome.written))


@app.command()
def serve(
    model: Annotated[str, typer.Option(help=MODEL_HELP)] = "tiny",
    host: Annotated[str, typer.Option(help="Bind address (loopback by default).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 8000,
    record: Annotated[bool, typer.Option(help="Gateway mode: record sessions as token-exact trajectories.")] = False,
    record_dir: Annotated[Path | None, typer.Option(help="Append recorded episodes to DIR/sessions.jsonl.")] = None,
    device: Annotated[str, typer.Option(help="Torch device: auto, cpu, cuda, …")] = "auto",
) -> None:
    """Serve a local checkpoint over an OpenAI-compatible API (chat with tools, token-id completions)."""
    from agentrl.serve.app import serve_model

    recording = " (recording sessions)" if record or record_dir else ""
    typer.echo(f"serving {model} on http://{host}:{port}/v1{recording}")
    serve_model(model, host=host, port=port, record=record, record_dir=record_dir, device=device)


@app.command("train-recorded")
def train_recorded_command(
    sessions: Annotated[Path, typer.Argument(help="A gateway's --record-dir (or its sessions.jsonl).")],
    output: Annotated[Path, typer.Option(help="Where to save the trained checkpoint.")],
    model: Annotated[str, typer.Option(help="The checkpoint that served the sessions.")] = "tiny",
    steps: Annotated[int, typer.Option(help="Learner steps over the recorded sessions.")] = 1,
    lr: Annotated[float, typer.Option(help="Learning rate.")] = 1e-5,
) -> None:
    """Train on recorded gateway sessions (rewarded, history intact), grouped by task, and save the result."""
    from agentrl.config import TrainerConfig
    from agentrl.serve.recorded import train_recorded

    history = train_recorded(sessions, model=model, output=output, steps=steps, config=TrainerConfig(lr=lr))
    typer.echo(f"sessions: {history[0]['report']}")
    for k, stats in enumerate(history, start=1):
        typer.echo(f"step {k}: " + ", ".join(f"{key} {v:.4g}" for key, v in stats.items() if key != "report"))
    typer.echo(f"saved to {output}")


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


def main() -> None:
    app()


if __name__ == "__main__":
    main()
