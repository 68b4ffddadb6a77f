"""`agentrl train`, `agentrl sft`, `agentrl train-recorded` and `agentrl report`: making and reading checkpoints."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

MODEL_HELP = "`tiny`, `tiny-extended`, `tiny-swe`, a checkpoint path, or a cached hub id."
TOOL_PARSER_HELP = "auto, hermes, qwen3_coder, llama3_json, mistral or pythonic."
train_app = typer.Typer()


def _config_help() -> str:
    from agentrl.config import RunConfig, field_docs

    return "\n".join(f"  {name} = {default}\n      {doc}" for name, default, doc in field_docs(RunConfig))


@train_app.command(context_settings={"help_option_names": ["-h", "--help"]})
def train(
    overrides: Annotated[list[str] | None, typer.Argument(help="Config overrides: key.sub=value …")] = None,
    scaffold: Annotated[str | None, typer.Option(help="Scaffold name or import path (`a+b` mixes).")] = None,
    model: Annotated[str | None, typer.Option(help=MODEL_HELP)] = None,
    config: Annotated[Path | None, typer.Option("-c", "--config", help="TOML config file.")] = None,
    resume: Annotated[Path | None, typer.Option(help="Resume the run in this directory.")] = None,
    name: Annotated[str | None, typer.Option(help="Run name (directory under output_dir).")] = None,
    help_config: Annotated[bool, typer.Option("--help-config", help="List every config field and exit.")] = False,
    nproc: Annotated[
        int,
        typer.Option(
            help="Data-parallel processes on this machine, started by accelerate's launcher (one per GPU; gloo on "
            "the CPU). Launched already (accelerate launch -m agentrl train, torchrun)? Leave it at 1."
        ),
    ] = 1,
    ray: Annotated[
        bool,
        typer.Option(
            "--ray",
            help="Play the episodes on Ray actors (rollout workers, tool servers; ray.* fields). `--ray ADDRESS` "
            "joins that cluster (auto, HOST:PORT, ray://HOST:PORT); bare, it starts Ray on this machine.",
        ),
    ] = False,
) -> None:
    """Train a policy with RL. With no arguments: the shipped tiny policy on the bundled code+search tasks."""
    from agentrl.config import load_config
    from agentrl.errors import AgentRLError, ConfigError
    from agentrl.runlog.report import report
    from agentrl.trainer import Trainer

    if help_config:
        typer.echo(_config_help())
        raise typer.Exit()
    overrides = ray_overrides(list(overrides or [])) if ray else list(overrides or [])
    if nproc > 1:
        args = [*overrides, *_given(scaffold=scaffold, model=model, config=config, resume=resume, name=name)]
        raise typer.Exit(_launch(nproc, args))
    if nproc < 1:
        raise ConfigError(f"--nproc must be >= 1, not {nproc}")
    extra = list(overrides)
    extra += [f"scaffold={scaffold}"] if scaffold else []
    extra += [f"policy.model={model}"] if model else []
    extra += [f"name={name}"] if name else []
    if resume is not None and not (resume / "config.toml").exists():
        raise ConfigError(f"{resume} is not a run directory (no config.toml)")
    run_config = load_config(resume / "config.toml" if resume is not None else config, extra)
    if run_config.ray.enabled and run_config.ray.learner_processes:  # the learner as Ray actors: start them, wait
        from agentrl.distributed.learner_actors import run_learner_actors

        run_dir, _ = run_learner_actors(run_config, str(resume) if resume else None, resume=resume is not None)
        typer.echo(report(Path(run_dir)))
        return
    trainer = Trainer(run_config, resume, resume=True) if resume is not None else Trainer(run_config)
    main = trainer.dp.is_main
    if main:
        typer.echo(f"run directory: {trainer.run_dir}")
    try:
        trainer.run()
    except AgentRLError as e:  # the run directory holds the last checkpoint: say how to go on from it
        e.args = (f"{e} (continue with: agentrl train --resume {trainer.run_dir})",)
        raise
    if main:
        typer.echo(report(trainer.run_dir))


def ray_overrides(arguments: list[str]) -> list[str]:
    """The overrides of `--ray [ADDRESS] ARGUMENTS`: the address arrives as the first positional argument (an
    override always has a `=`)."""
    address = arguments[0] if arguments and "=" not in arguments[0] else None
    rest = arguments[1:] if address else arguments
    return [*rest, "ray.enabled=true", *([f"ray.address={address}"] if address else [])]


def _given(**options: object) -> list[str]:
    return [arg for key, value in options.items() if value is not None for arg in (f"--{key}", str(value))]


def _launch(nproc: int, args: list[str]) -> int:
    """Run `agentrl train ARGS` in `nproc` processes under accelerate's launcher; its exit code. The processes
    find each other through a free port on this machine; each prints its own errors."""
    import os
    import socket
    import subprocess
    import sys

    import torch

    from agentrl.errors import ConfigError

    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise ConfigError("--nproc inside a launched process: the launcher already started the processes")
    if torch.cuda.is_available() and nproc > torch.cuda.device_count():
        raise ConfigError(f"--nproc {nproc} but this machine has {torch.cuda.device_count()} GPUs: one process per GPU")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [
        *(sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_machines", "1"),
        *("--num_processes", str(nproc), "--main_process_port", str(port)),
        *("--mixed_precision", "no", "--dynamo_backend", "no", "-m", "agentrl", "train", *args),
    ]
    return subprocess.run(command, check=False).returncode


@train_app.command()
def sft(
    data: Annotated[Path, typer.Option(help='JSONL of conversations: {"messages": [...], "tools": [...]}')],
    output: Annotated[Path, typer.Option(help="Where to save the fine-tuned model.")],
    model: Annotated[str, typer.Option(help=MODEL_HELP)] = "tiny",
    epochs: Annotated[float, typer.Option(help="Passes over the data.")] = 1.0,
    lr: Annotated[float, typer.Option(help="Learning rate.")] = 1e-4,
) -> None:
    """Supervised fine-tuning on tool-use conversations (trl SFTTrainer, assistant-only loss)."""
    import torch

    from agentrl.config import PolicyConfig
    from agentrl.doctor.tool_visibility import called_tools, record_trained_tools
    from agentrl.policy import load_model_and_tokenizer
    from agentrl.train.sft import SFTSettings, read_conversations, run_sft

    conversations = read_conversations(data)
    model_obj, tokenizer = load_model_and_tokenizer(PolicyConfig(model=model))
    settings = SFTSettings(epochs=epochs, lr=lr, use_cpu=not torch.cuda.is_available())
    metrics = run_sft(model_obj, tokenizer, conversations, output_dir=str(output), settings=settings)
    # a template that renders no tool schemas leaves the model the tools it learned: say which, for later runs
    record_trained_tools(model_obj.config, called_tools(c["messages"] for c in conversations))
    model_obj.save_pretrained(output)
    tokenizer.save_pretrained(output)
    from agentrl.train.model_card import write_model_card

    scalars = {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float))}
    write_model_card(output, base_model=model, metrics=scalars)
    typer.echo(f"saved to {output}: {metrics}")


@train_app.command("train-recorded")
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


@train_app.command()
def report(run_dir: Annotated[Path, typer.Argument(help="A run directory.")]) -> None:
    """Draw a run's plots and print its summary."""
    from agentrl.runlog.report import report as make_report

    typer.echo(make_report(run_dir))
