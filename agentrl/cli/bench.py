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
) -> None:
    """Tokens/s of the tiny policy: continuous batching vs static batches vs each trajectory on its own."""
    import json

    from agentrl.bench.generate_bench import run_benchmark

    typer.echo(json.dumps(run_benchmark(trajectories, turns, max_new_tokens, threads, repeats), indent=2))


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
