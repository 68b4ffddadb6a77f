"""`agentrl bench …`: benchmarks that print JSON with their baseline measured in the same run."""

from __future__ import annotations

from typing import Annotated

import typer

bench_app = typer.Typer(help="Benchmarks; each prints JSON with its baseline measured in the same run.")


@bench_app.command("tools")
def bench_tools(
    sessions: Annotated[int, typer.Option(help="Concurrent sessions issuing calls.")] = 32,
    seconds: Annotated[float, typer.Option(help="Duration of each load phase.")] = 10.0,
    forks: Annotated[int, typer.Option(help="Session forks to time.")] = 50,
    rate: Annotated[float, typer.Option(help="Offered load (calls/s) of the fixed-rate latency phase.")] = 150.0,
) -> None:
    """Sandboxed `print(1)` calls through HTTP: persistent interpreters vs a fresh sandbox per call, and fork."""
    import asyncio
    import json

    from agentrl.bench.tools_bench import run_benchmark

    typer.echo(json.dumps(asyncio.run(run_benchmark(sessions, seconds, forks, rate)), indent=2))


@bench_app.command("eval")
def bench_eval(
    scaffold: Annotated[str, typer.Option(help="Scaffold whose held-out tasks are evaluated.")] = "code",
    model: Annotated[str, typer.Option(help="Checkpoint `agentrl serve` loads.")] = "tiny",
    tasks: Annotated[int, typer.Option(help="Tasks per run.")] = 48,
    concurrency: Annotated[str, typer.Option(help="Comma-separated concurrency levels.")] = "1,8,32",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """`agentrl eval` tasks/min against a local `agentrl serve`, by concurrency and transport."""
    import json

    from agentrl.bench.eval_bench import format_table, run_benchmark

    levels = tuple(int(c) for c in concurrency.split(",") if c.strip())
    result = run_benchmark(scaffold, model, tasks, levels)
    typer.echo(json.dumps(result, indent=2) if as_json else format_table(result))


@bench_app.command("rollout")
def bench_rollout(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    tasks: Annotated[int, typer.Option(help="Tasks per step.")] = 16,
    samples: Annotated[int, typer.Option(help="Trajectories per task.")] = 8,
) -> None:
    """The rollout engine vs batch-synchronous rollouts and the ideal bound (simulated model and tools)."""
    import json

    from agentrl.bench.rollout_bench import format_table, run_benchmark

    result = run_benchmark(tasks=tasks, samples=samples)
    typer.echo(json.dumps(result, indent=2) if as_json else format_table(result))


@bench_app.command("generate")
def bench_generate(
    trajectories: Annotated[int, typer.Option(help="Concurrent multi-turn episodes.")] = 32,
    turns: Annotated[int, typer.Option(help="Policy turns per episode.")] = 2,
    max_new_tokens: Annotated[int, typer.Option(help="Token limit of one turn.")] = 64,
    threads: Annotated[int | None, typer.Option(help="torch intra-op threads (default: torch's).")] = None,
    repeats: Annotated[int, typer.Option(help="Runs of each schedule; the median counts.")] = 3,
    model: Annotated[str, typer.Option(help="`tiny` or a checkpoint directory with Qwen's chat markup.")] = "tiny",
    device: Annotated[str, typer.Option(help="Torch device of the model: `cpu`, `cuda`, ...")] = "cpu",
    dtype: Annotated[str, typer.Option(help="Dtype of the weights: `float32`, `bfloat16`.")] = "float32",
) -> None:
    """Tokens/s of the in-process sampler (the tiny policy by default): continuous batching with and without prefix
    reuse vs static batches vs each trajectory on its own."""
    import json

    from agentrl.bench.generate_bench import run_benchmark

    result = run_benchmark(trajectories, turns, max_new_tokens, threads, repeats, model, device, dtype)
    typer.echo(json.dumps(result, indent=2))


@bench_app.command("learner")
def bench_learner(
    tokens: Annotated[int, typer.Option(help="Tokens of the micro-batch.")] = 16384,
    vocab: Annotated[int, typer.Option(help="Vocabulary size (Qwen2.5: 151936).")] = 151936,
    hidden: Annotated[int, typer.Option(help="Hidden size (small, so the vocabulary term dominates).")] = 256,
    chunk: Annotated[int, typer.Option(help="trainer.logprob_chunk_tokens of the chunked variant.")] = 4096,
    device: Annotated[str, typer.Option(help="`cpu` (counted on fake tensors) or `cuda` (allocated).")] = "cpu",
    entropy: Annotated[str, typer.Option(help="Entropy: `off`, `value` (a metric, the default) or `grad`.")] = "value",
) -> None:
    """Peak memory of the log-prob/entropy loss from final hidden states, forward and backward: chunked vs full
    fp32 logits, each variant in its own subprocess. On the CPU nothing is allocated: a tracker sums the bytes of
    live tensors on fake tensors (kernels' internal scratch not counted); with --device cuda it is
    torch.cuda.max_memory_allocated."""
    import json

    from agentrl.bench.learner_bench import run_benchmark

    typer.echo(json.dumps(run_benchmark(tokens, vocab, hidden, chunk, device, entropy), indent=2))


@bench_app.command("trl")
def bench_trl(
    steps: Annotated[int, typer.Option(help="Training steps of each side.")] = 8,
    prompts: Annotated[int, typer.Option(help="Tasks per step.")] = 8,
    samples: Annotated[int, typer.Option(help="Trajectories per task (the group size).")] = 4,
    max_new_tokens: Annotated[int, typer.Option(help="Tokens the policy may sample in one turn.")] = 64,
    tool_rounds: Annotated[int, typer.Option(help="Tool rounds an episode may take before its last turn.")] = 3,
    lr: Annotated[float, typer.Option(help="Learning rate of both sides.")] = 2e-4,
    minibatches: Annotated[int, typer.Option(help="Optimizer steps per step, on both sides.")] = 4,
    seed: Annotated[int, typer.Option(help="Seed of both sides.")] = 0,
    device: Annotated[str, typer.Option(help="Torch device of both sides.")] = "cpu",
    threads: Annotated[int, typer.Option(help="torch intra-op threads of both sides (0: torch's default).")] = 0,
    agentrl_set: Annotated[
        list[str] | None, typer.Option("--set", help="A `key=value` setting of agentrl's side only (repeatable).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """agentrl vs TRL's GRPOTrainer on the code scaffold's calculator task with the tiny policy: the same prompts,
    group size, token limits and learning rate, both in this process with their steps alternating; seconds per
    step (wall and CPU) and the reward curve of each side, and the TRL / agentrl ratio."""
    import json

    from agentrl.bench.trl_bench import TrlBenchConfig, run_benchmark
    from agentrl.bench.trl_bench_report import format_table

    config = TrlBenchConfig(
        steps=steps,
        prompts_per_step=prompts,
        samples_per_prompt=samples,
        max_new_tokens_per_turn=max_new_tokens,
        max_tool_rounds=tool_rounds,
        lr=lr,
        minibatches_per_step=minibatches,
        seed=seed,
        device=device,
        torch_threads=threads,
        agentrl_overrides=tuple(agentrl_set or ()),
    )
    result = run_benchmark(config)
    typer.echo(json.dumps(result, indent=2) if as_json else format_table(result))


@bench_app.command("scale")
def bench_scale(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    tasks: Annotated[int, typer.Option(help="Tasks per step.")] = 8,
    samples: Annotated[int, typer.Option(help="Trajectories per task.")] = 4,
    steps: Annotated[int, typer.Option(help="Timed steps per arm (after one warm-up step).")] = 3,
) -> None:
    """Rollout steps/s with 1 vs 2 Ray rollout workers (simulated model and tool), and the weight-sync time."""
    import json

    from agentrl.bench.scale_bench import format_table, run_benchmark
    from agentrl.distributed.cluster import require_ray

    require_ray()
    result = run_benchmark(tasks=tasks, samples=samples, steps=steps)
    typer.echo(json.dumps(result, indent=2) if as_json else format_table(result))
