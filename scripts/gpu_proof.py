"""The GPU proof: a randomly initialised Qwen3 of about 0.5B parameters (no download) with the tiny tokenizer and
the real Qwen3 chat template, trained on a GPU with the transformers backend.

    python scripts/gpu_proof.py --out runs/gpu_proof                      # on a GPU machine
    python scripts/gpu_proof.py --size tiny --device cpu --seq-len 128 --batch 2 --out /tmp/proof   # a smoke test

Three measurements, printed as JSON (and written to `<out>/gpu_proof.json`):

1. `learner`: `Learner.update` steps over synthetic samples of `--seq-len` tokens (`--batch` of them per step,
   one optimizer step each), under the default precision (bf16 autocast over fp32 master weights on a GPU):
   tokens/s, model FLOPs utilisation (MFU) and peak GPU memory; `learner_no_checkpointing` the same with
   activation checkpointing off (the default turns it on above 200M parameters, and MFU does not count the
   recomputation). MFU counts 6·N FLOPs per token for the weights (forward and backward) plus
   12·layers·heads·head_dim·seq_len for attention, against the GPU's dense bf16 peak (`--peak-tflops`, else
   looked up from the device name).
2. `fsdp`: the FSDP2 learner (`trainer.sharding=fsdp`, a process group of one on the device) against the
   unsharded learner on the same samples for `--fsdp-steps` steps: both losses, seconds per step, peak memory, and
   the largest difference between the weights they reach.
3. `train`: `agentrl train` on the code scaffold for `--train-steps` steps from the saved checkpoint
   (`policy.backend=transformers`): seconds per step, rollout tokens/s, training tokens/s and the sampler–learner
   log-prob gap, read from the run's metrics.jsonl.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SIZES = {
    # Qwen3-0.6B's and Qwen3-1.7B's shapes (28 layers, 16 query and 8 key/value heads of 128), with Qwen3's padded
    # vocabulary of 151,936 rows: the tiny tokenizer names the first few thousand, the rest are rows a random model
    # samples and the learner scores like any other, as a real model's output layer is that wide. A size without a
    # vocab_size takes the tokenizer's.
    "0.5b": {"hidden_size": 1024, "intermediate_size": 3072, "head_dim": 128, "vocab_size": 151_936},
    "1.7b": {"hidden_size": 2048, "intermediate_size": 6144, "head_dim": 128, "vocab_size": 151_936},
    "tiny": {
        "hidden_size": 64,
        "intermediate_size": 128,
        "head_dim": 16,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
    },  # fmt: skip
}
PEAK_BF16_TFLOPS = {"H100 PCIe": 756.0, "H100": 989.0, "H200": 989.0, "A100": 312.0, "L40S": 362.0}
"""Dense bf16 tensor-core peaks (TFLOP/s) by device-name fragment, most specific first."""


def build_model(size: str, out: Path) -> tuple[Path, int]:
    """A random Qwen3 of `size` with the tiny tokenizer and trl's Qwen3 template, saved under `out`."""
    import torch
    import transformers

    from agentrl.testing.families import FAMILIES, family_tokenizer

    tokenizer = family_tokenizer("qwen3")
    eos = [tokenizer.convert_tokens_to_ids(t) for t in FAMILIES["qwen3"].generation_eos]
    shape = {"num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8} | SIZES[size]
    shape["vocab_size"] = max(len(tokenizer), shape.get("vocab_size", 0))
    config = transformers.Qwen3Config(
        max_position_embeddings=32768,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=eos,
        **shape,
    )
    torch.manual_seed(0)
    model = transformers.Qwen3ForCausalLM(config)
    model.generation_config = transformers.GenerationConfig(eos_token_id=eos, pad_token_id=tokenizer.pad_token_id)
    path = out / f"qwen3-{size}"
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path, sum(p.numel() for p in model.parameters())


def measure_learner(
    path: Path, device: str, seq_len: int, batch: int, steps: int, peak_tflops: float, *, checkpointing: bool | None
) -> dict:
    """`Learner.update` throughput under the default config; `checkpointing` True/False forces activation
    checkpointing on or off (None: the default, on above `policy.activation_checkpointing_above_params`). MFU counts
    the model's FLOPs only, so recomputed activations lower it."""
    import torch

    from agentrl.config import PolicyConfig, TrainerConfig
    from agentrl.policy import load_model_and_tokenizer
    from agentrl.train.learner import Learner

    policy = PolicyConfig(model=str(path), device=device, gradient_checkpointing=checkpointing)
    model, _ = load_model_and_tokenizer(policy)
    learner = Learner(model, TrainerConfig(lr=1e-6, max_tokens_per_microbatch=seq_len), pad_token_id=0)
    samples = synthetic_samples(model.config.vocab_size, seq_len, batch)
    cuda = device.startswith("cuda")
    learner.update(samples)  # warm-up: kernels, allocator, autocast caches
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    for _ in range(steps):
        stats = learner.update(samples)
    if cuda:
        torch.cuda.synchronize()
    seconds = (time.perf_counter() - started) / steps
    config = model.config
    params = sum(p.numel() for p in model.parameters())
    attention_width = config.num_attention_heads * config.head_dim
    flops_per_token = 6 * params + 12 * config.num_hidden_layers * attention_width * seq_len
    tokens_per_s = batch * seq_len / seconds
    out = {
        "precision": learner.precision,
        "activation_checkpointing": checkpointing_on(model),
        "parameters": params,
        "seq_len": seq_len,
        "sequences_per_step": batch,
        "seconds_per_step": round(seconds, 4),
        "tokens_per_s": round(tokens_per_s, 1),
        "model_tflops_per_s": round(flops_per_token * tokens_per_s / 1e12, 2),
        "loss": stats["loss"],
    }
    if peak_tflops > 0:
        out["mfu"] = round(flops_per_token * tokens_per_s / (peak_tflops * 1e12), 4)
    if cuda:
        out["peak_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    del learner, model
    if cuda:
        torch.cuda.empty_cache()
    return out


def checkpointing_on(model: Any) -> bool:
    flag = getattr(model, "is_activation_checkpointing", None)  # transformers 5.24's name
    return bool(flag if flag is not None else model.is_gradient_checkpointing)


def synthetic_samples(vocab_size: int, seq_len: int, batch: int) -> list[Any]:
    """`batch` samples of random tokens: a quarter prompt, then sampled tokens with advantage 0.5."""
    import torch

    from agentrl.train.samples import TrainSample

    generator = torch.Generator().manual_seed(0)
    samples = []
    for _ in range(batch):
        ids = torch.randint(10, vocab_size, (seq_len,), generator=generator).tolist()
        mask = [False] * (seq_len // 4) + [True] * (seq_len - seq_len // 4)  # a prompt, then sampled tokens
        advantages = [0.5 if m else 0.0 for m in mask]
        samples.append(TrainSample(tuple(ids), tuple(mask), tuple(advantages), tuple(-2.0 * m for m in mask)))
    return samples


def measure_fsdp(path: Path, device: str, seq_len: int, batch: int, steps: int) -> dict:
    """The FSDP2 learner (`trainer.sharding=fsdp`, a process group of one) against the unsharded learner on the
    same samples: each one's loss at every step, seconds per step and peak memory, and the largest difference
    between the weights they reach."""
    import torch

    from agentrl.config import PolicyConfig, TrainerConfig
    from agentrl.policy import load_model_and_tokenizer
    from agentrl.train.learner import Learner

    cuda = device.startswith("cuda")
    out: dict[str, Any] = {}
    reached: dict[str, dict[str, Any]] = {}
    for sharding in ("none", "fsdp"):
        model, _ = load_model_and_tokenizer(PolicyConfig(model=str(path), device=device))
        config = TrainerConfig(lr=1e-5, max_tokens_per_microbatch=seq_len, sharding=sharding)
        learner = Learner(model, config, pad_token_id=0)
        samples = synthetic_samples(model.config.vocab_size, seq_len, batch)
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        started = time.perf_counter()
        losses = [learner.update(samples)["loss"] for _ in range(steps)]
        if cuda:
            torch.cuda.synchronize()
        out[sharding] = {"losses": losses, "seconds_per_step": round((time.perf_counter() - started) / steps, 4)}
        if cuda:
            out[sharding]["peak_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
        reached[sharding] = {name: p.detach().float().cpu() for name, p in model.named_parameters()}
        del learner, model
        if cuda:
            torch.cuda.empty_cache()
    pairs = zip(out["none"]["losses"], out["fsdp"]["losses"], strict=True)
    out["largest_loss_difference"] = max(abs(a - b) for a, b in pairs)
    out["largest_weight_difference"] = max(
        float((reached["none"][k] - reached["fsdp"][k]).abs().max()) for k in reached["none"]
    )
    return out


def measure_training(path: Path, device: str, steps: int, out: Path) -> dict:
    """`agentrl train` on the code scaffold in a child process (its own CUDA context and peak memory)."""
    run = out / "train"
    command = [
        sys.executable,
        "-m",
        "agentrl",
        "train",
        "--model",
        str(path),
        "--scaffold",
        "code",
        f"output_dir={run}",
        "name=proof",
        f"trainer.steps={steps}",
        "eval.every_steps=0",
        "progress=false",
        f"policy.device={device}",
        "rollout.prompts_per_step=8",
        "rollout.samples_per_prompt=4",
        "trainer.lr=1e-6",
        "trainer.skip_zero_advantage_groups=false",  # a random model earns no reward: update on every group
    ]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}
    records = [json.loads(line) for line in (run / "proof" / "metrics.jsonl").read_text().splitlines()]
    steps_run = [r for r in records if r.get("step", 0) > 0]
    mean = lambda key: sum(r.get(key, 0.0) for r in steps_run) / max(len(steps_run), 1)  # noqa: E731
    return {
        "steps": len(steps_run),
        "wall_s": round(time.perf_counter() - started, 1),
        "seconds_per_step": round(mean("time/step_s"), 3),
        "rollout_tokens_per_s": round(mean("rollout/tokens_per_s"), 1),
        "train_tokens_per_s": round(mean("train/train_tokens_per_s"), 1),
        "sampler_logprob_abs_diff": mean("train/sampler_logprob_abs_diff"),
        "infra_failures": sum(r.get("infra_failures", 0.0) for r in steps_run),
    }


def peak_for(device: str) -> float:
    import torch

    if not device.startswith("cuda") or not torch.cuda.is_available():
        return 0.0
    name = torch.cuda.get_device_name()
    return next((tflops for fragment, tflops in PEAK_BF16_TFLOPS.items() if fragment in name), 0.0)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--size", choices=sorted(SIZES), default="0.5b")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--seq-len", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=8, help="Sequences per learner step.")
    parser.add_argument("--steps", type=int, default=5, help="Timed learner steps (after one warm-up step).")
    parser.add_argument("--train-steps", type=int, default=3, help="Steps of agentrl train on the code scaffold.")
    parser.add_argument("--peak-tflops", type=float, default=None, help="The device's dense bf16 peak.")
    parser.add_argument(
        "--compare-checkpointing",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="Also time the learner with activation checkpointing off (the default turns it on at this size).",
    )
    parser.add_argument("--fsdp-steps", type=int, default=2, help="Learner steps of FSDP2 against unsharded.")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    path, params = build_model(args.size, args.out)
    peak = args.peak_tflops if args.peak_tflops is not None else peak_for(args.device)
    report: dict[str, Any] = {"model": str(path), "parameters": params, "device": args.device}
    timing = (path, args.device, args.seq_len, args.batch, args.steps, peak)
    report["learner"] = measure_learner(*timing, checkpointing=None)
    if args.compare_checkpointing:
        report["learner_no_checkpointing"] = measure_learner(*timing, checkpointing=False)
    if args.fsdp_steps > 0:
        report["fsdp"] = measure_fsdp(path, args.device, args.seq_len, args.batch, args.fsdp_steps)
    if args.train_steps > 0:
        report["train"] = measure_training(path, args.device, args.train_steps, args.out)
    (args.out / "gpu_proof.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
