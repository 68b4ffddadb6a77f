"""The GPU proof: agentrl's learner, sampler and training loop on a GPU, each beside its baseline, in one command.

    . .gpu/setup.sh && python3 scripts/gpu_proof.py --out /tmp/proof            # on a GPU machine (~6 minutes)
    python scripts/gpu_proof.py --quick --device cpu --out /tmp/proof            # a smoke test of every part

Random Qwen3s of Qwen3-0.6B's and Qwen3-1.7B's shapes (no download; `gpu_parts.SIZES`), the tiny tokenizer and the
real Qwen3 chat template. The parts, each in a process of its own with its own time limit, so one that fails or
runs out of time is reported as such and the others still run:

- `learner_<size>_<tokens>`: `Learner.update` with its defaults (bf16 parameters over fp32 master weights, packed
  micro-batches, 4 optimizer steps and a π_old pass per update, checkpointing decided by memory): tokens/s, MFU
  over the FLOPs every pass of the update runs (`agentrl/train/flops.py`), peak memory; 0.6B and 1.7B shapes at 4k
  and 16k tokens per sequence.
- `logprob_kernels`: the learner's chunked log-prob against trl's fused linear + log-prob kernel (16k positions, a
  152k vocabulary, forward and backward): seconds, peak memory, error against an fp64 reference.
- `sampler`: decoding tokens/s of the in-process sampler against transformers' batched `generate` on the same
  model, prompts and lengths (1, 8 and 32 rows), its hidden synchronisations, and the sampler–learner log-prob gap.
- `train`: `agentrl train` on the code scaffold with the 0.6B shape: seconds per step, rollout and update tokens/s,
  the log-prob gap and the TIS weight.
- `bench_trl`: `agentrl bench trl --device cuda` (agentrl and TRL's GRPOTrainer on the same workload).
- `fsdp`: the FSDP2 learner (a process group of one) against the unsharded learner on the same samples.

Writes `<out>/gpu_proof.json` and `<out>/gpu_proof.md` (a table against the targets of the work it proves) and
prints the table. `--parts a,b` runs some of them.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

LEARNER_RUNS = {  # name: (size, tokens per sequence, sequences per update)
    "learner_0.6b_4k": ("0.6b", 4096, 8),
    "learner_0.6b_16k": ("0.6b", 16384, 2),
    "learner_1.7b_4k": ("1.7b", 4096, 8),
    "learner_1.7b_16k": ("1.7b", 16384, 2),
}
PARTS = (*LEARNER_RUNS, "logprob_kernels", "sampler", "train", "bench_trl", "fsdp")
TIME_LIMIT_S = {"logprob_kernels": 60, "sampler": 120, "train": 150, "bench_trl": 120, "fsdp": 90}
"""Seconds each part may take (a learner run: 75), model building included."""


def run_part(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """Measure one part in this process (the child that `main` starts)."""
    import gpu_parts

    quick = args.quick
    size = "tiny" if quick else "0.6b"
    if name in LEARNER_RUNS:
        model_size, tokens, sequences = LEARNER_RUNS[name]
        path, _ = gpu_parts.build_model("tiny" if quick else model_size, args.out)
        tokens = 256 if quick else tokens
        return gpu_parts.measure_learner(path, args.device, tokens, sequences, steps=1 if quick else 3)
    if name == "logprob_kernels":
        if quick:
            return gpu_parts.measure_logprob_kernels(args.device, 256, 64, 4096, 2)
        return gpu_parts.measure_logprob_kernels(args.device, 16384, 1024, 151_936, 5)
    path, _ = gpu_parts.build_model(size, args.out)
    if name == "sampler":
        rows = [1, 4] if quick else [1, 8, 32]
        dtype = "float32" if args.device == "cpu" else "bfloat16"
        return gpu_parts.measure_sampler(path, args.device, rows, 32 if quick else 256, 12 if quick else 128, dtype)
    if name == "train":
        if quick:
            return gpu_parts.measure_training(path, args.device, 2, args.out, tasks=2, group=2)
        return gpu_parts.measure_training(path, args.device, 4, args.out)
    if name == "bench_trl":
        return gpu_parts.measure_bench_trl(args.device, 2 if quick else 3)
    if name == "fsdp":
        return gpu_parts.measure_fsdp(path, args.device, 128 if quick else 4096, 2 if quick else 4, 2)
    raise SystemExit(f"unknown part {name!r}; known: {', '.join(PARTS)}")


def in_child(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """Run one part in a child process under its time limit; its result, or what stopped it."""
    limit = TIME_LIMIT_S.get(name, 75) * (3 if args.device == "cpu" else 1)
    command = [sys.executable, __file__, "--part", name, "--out", str(args.out), "--device", args.device]
    command += ["--quick"] if args.quick else []
    started = time.perf_counter()
    # a session of its own, so that a part out of time goes with everything it started (`agentrl train`'s
    # processes hold GPU memory the next part needs)
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, stderr = child.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.communicate()
        return {"error": f"ran past its {limit} s limit"}
    seconds = round(time.perf_counter() - started, 1)
    result_file = args.out / f"{name}.json"
    if child.returncode != 0 or not result_file.exists():
        lines = stderr.strip().splitlines()
        return {"error": lines[-1] if lines else f"exit {child.returncode}", "seconds": seconds}
    return json.loads(result_file.read_text()) | {"seconds": seconds}


def environment(device: str) -> dict[str, Any]:
    import torch
    import transformers

    out = {
        "date": datetime.date.today().isoformat(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": device,
    }
    if device.startswith("cuda") and torch.cuda.is_available():
        out["card"] = torch.cuda.get_device_name()
    return out


def table(report: dict[str, Any]) -> str:
    """The report as a markdown table: each measurement beside its target."""
    rows = ["| part | measured | target |", "|---|---|---|"]

    def add(part: str, result: dict[str, Any] | None, target: str, render: Callable[[dict], str]) -> None:
        """A part's row: nothing when it did not run, what stopped it when it failed, else `render(result)`."""
        if result is not None:
            measured = f"failed: {result['error']}" if "error" in result else render(result)
            rows.append(f"| {part} | {measured} | {target} |")

    for name in LEARNER_RUNS:
        add(name, report.get(name), "MFU ≥ 40%", _learner_row)
    add("log-prob kernels", report.get("logprob_kernels"), "choose the faster at equal error", _kernels_row)
    sampler = report.get("sampler")
    if sampler is not None and "error" not in sampler:
        for key, r in sampler.items():
            if key.startswith("rows_"):
                add(f"sampler, {key[5:]} rows", r, "≥ 1× generate", _sampler_row)
        gap = sampler.get("sampler_learner_logprob_gap", {"mean": float("nan"), "max": float("nan")})
        add("sampler–learner gap", gap, "bf16: logged, TIS on", lambda g: f"mean {g['mean']:.2e}, max {g['max']:.2e}")
    else:
        add("sampler", sampler, "≥ 1× generate", str)
    add("agentrl train (code, 0.6B)", report.get("train"), "rollout was 73–140 tokens/s", _train_row)
    add("agentrl bench trl", report.get("bench_trl"), "≥ 2× (was 0.09×)", _bench_trl_row)
    add("FSDP2 one rank vs unsharded", report.get("fsdp"), "runs; equal up to rounding", _fsdp_row)
    env = report.get("environment", {})
    head = f"{env.get('card', env.get('device'))}, torch {env.get('torch')}, transformers {env.get('transformers')}"
    return f"GPU proof, {env.get('date')}: {head}\n\n" + "\n".join(rows) + "\n"


def _learner_row(r: dict[str, Any]) -> str:
    mfu = f"MFU {100 * r['mfu']:.1f}%, " if "mfu" in r else ""
    return (
        f"{mfu}{r['tokens_per_s']:,.0f} tokens/s, {r['seconds_per_update']} s/update "
        f"({r['optimizer_steps_per_update']:.0f} optimizer steps + π_old), {r['recomputed_layers']} layers "
        f"recomputed, peak {r.get('peak_memory_gib', '?')} GiB"
    )


def _kernels_row(r: dict[str, Any]) -> str:
    ours, theirs = r["agentrl_chunked"], r["trl_fused"]
    return (
        f"{r['tokens']:,} tokens × {r['vocab']:,} vocabulary, forward + backward: agentrl "
        f"{ours['seconds']} s ({ours.get('peak_memory_gib', '?')} GiB, log-prob error "
        f"{ours['max_error_logprobs']:.1e}), trl {theirs['seconds']} s ({theirs.get('peak_memory_gib', '?')} "
        f"GiB, {theirs['max_error_logprobs']:.1e})"
    )


def _sampler_row(r: dict[str, Any]) -> str:
    return (
        f"{r['agentrl']['tokens_per_s']:,.0f} vs generate {r['generate']['tokens_per_s']:,.0f} tokens/s "
        f"({r['agentrl_over_generate']}×), {r['agentrl']['hidden_syncs_per_step']} hidden syncs/step"
    )


def _train_row(r: dict[str, Any]) -> str:
    return (
        f"{r['seconds_per_step']} s/step (collect {r['collect_s']}, update {r['update_s']}), "
        f"rollout {r['rollout_tokens_per_s']:,.0f} tokens/s, gap {r['sampler_logprob_abs_diff']:.2e}, "
        f"TIS weight {r['tis_weight']:.3f}, infra failures {r['infra_failures']:.0f}"
    )


def _bench_trl_row(r: dict[str, Any]) -> str:
    return (
        f"TRL/agentrl {r.get('trl_over_agentrl_wall')}× wall (agentrl {r['agentrl']['median_wall_s']} s, "
        f"TRL {r['trl']['median_wall_s']} s a step), reward not worse: {r.get('reward_not_worse')}"
    )


def _fsdp_row(r: dict[str, Any]) -> str:
    return (
        f"loss Δ {r['largest_loss_difference']:.2e}, weight Δ {r['largest_weight_difference']}, "
        f"{r['fsdp']['seconds_per_update']} vs {r['unsharded']['seconds_per_update']} s/update"
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--parts", default=",".join(PARTS), help="comma-separated parts to run")
    parser.add_argument("--quick", action="store_true", help="tiny sizes and few steps: a smoke test of every part")
    parser.add_argument("--part", help=argparse.SUPPRESS)  # a child's one part
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.part:
        result = run_part(args.part, args)
        (args.out / f"{args.part}.json").write_text(json.dumps(result, indent=2))
        return result
    report: dict[str, Any] = {"environment": environment(args.device)}
    for name in args.parts.split(","):
        print(f"gpu_proof: {name} ...", file=sys.stderr, flush=True)
        report[name] = in_child(name, args)
        (args.out / "gpu_proof.json").write_text(json.dumps(report, indent=2))
    markdown = table(report)
    (args.out / "gpu_proof.md").write_text(markdown)
    print(markdown)
    return report


if __name__ == "__main__":
    main()
