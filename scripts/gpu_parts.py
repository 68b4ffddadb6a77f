"""The measurements of the GPU proof (`scripts/gpu_proof.py` runs each in a process of its own): the model they
share, the learner's model FLOPs utilisation, the sampler against transformers' `generate`, `agentrl train`,
`agentrl bench trl` and FSDP2 against the unsharded learner. Every function returns a JSON-able dict.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

SIZES = {
    # Qwen3-0.6B's and Qwen3-1.7B's shapes (28 layers, 16 query and 8 key/value heads of 128), with Qwen3's padded
    # vocabulary of 151,936 rows: the tiny tokenizer names the first few thousand, the rest are rows a random model
    # samples and the learner scores like any other, as a real model's output layer is that wide. A size without a
    # vocab_size takes the tokenizer's.
    "0.6b": {"hidden_size": 1024, "intermediate_size": 3072, "head_dim": 128, "vocab_size": 151_936},
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
    """A random Qwen3 of `size` with the tiny tokenizer and trl's Qwen3 template, saved under `out` (once)."""
    import torch
    import transformers

    from agentrl.testing.families import FAMILIES, family_tokenizer

    path = out / f"qwen3-{size}"
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
    if (path / "config.json").exists():
        return path, int(json.loads((path / "meta.json").read_text())["parameters"])
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.device(device):  # random initialisation of a 1.7B model on the CPU takes most of a minute
        model = transformers.Qwen3ForCausalLM(config)
    model.generation_config = transformers.GenerationConfig(eos_token_id=eos, pad_token_id=tokenizer.pad_token_id)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    parameters = sum(p.numel() for p in model.parameters())
    (path / "meta.json").write_text(json.dumps({"parameters": parameters}))
    return path, parameters


def peak_tflops(device: str) -> float:
    import torch

    if not device.startswith("cuda") or not torch.cuda.is_available():
        return 0.0
    name = torch.cuda.get_device_name()
    return next((tflops for fragment, tflops in PEAK_BF16_TFLOPS.items() if fragment in name), 0.0)


def synchronize(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def synthetic_samples(vocab_size: int, seq_len: int, batch: int) -> list[Any]:
    """`batch` samples of random tokens: a quarter prompt, then sampled tokens with advantage ±0.5."""
    import torch

    from agentrl.train.samples import TrainSample

    generator = torch.Generator().manual_seed(0)
    samples = []
    for b in range(batch):
        ids = torch.randint(10, vocab_size, (seq_len,), generator=generator).tolist()
        mask = [False] * (seq_len // 4) + [True] * (seq_len - seq_len // 4)  # a prompt, then sampled tokens
        advantage = 0.5 if b % 2 == 0 else -0.5
        advantages = [advantage if m else 0.0 for m in mask]
        samples.append(TrainSample(tuple(ids), tuple(mask), tuple(advantages), tuple(-2.0 * m for m in mask)))
    return samples


def measure_learner(
    path: Path, device: str, seq_len: int, batch: int, steps: int, *, checkpointing: bool | None = None, **config: Any
) -> dict[str, Any]:
    """`Learner.update` under the default config (bf16 parameters over fp32 masters on a GPU, packing, 4 optimizer
    steps and a π_old pass per update), `steps` timed updates after one warm-up. MFU counts the model FLOPs every
    pass of the update really runs (`agentrl.train.flops.update_flops`: each optimizer step's forward and backward,
    the π_old forward), not what activation checkpointing recomputes."""
    import torch

    from agentrl.config import PolicyConfig, TrainerConfig
    from agentrl.policy import load_model_and_tokenizer
    from agentrl.train.flops import update_flops
    from agentrl.train.learner import Learner

    model, _ = load_model_and_tokenizer(PolicyConfig(model=str(path), device=device))
    trainer = TrainerConfig(lr=1e-6, max_tokens_per_microbatch=max(seq_len, 16384), **config)
    learner = Learner(model, trainer, pad_token_id=0, activation_checkpointing=checkpointing)
    samples = synthetic_samples(model.config.vocab_size, seq_len, batch)
    flops = update_flops(model, samples, trainer)
    learner.update(samples)  # warm-up: kernels, allocator, packing check
    synchronize(device)
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    for _ in range(steps):
        stats = learner.update(samples)
    synchronize(device)
    seconds = (time.perf_counter() - started) / steps
    peak = peak_tflops(device)
    out = {
        "precision": learner.precision,
        "recomputed_layers": learner.recomputed_layers,
        "packing": bool(learner.packing),
        "parameters": sum(p.numel() for p in model.parameters()),
        "seq_len": seq_len,
        "sequences": batch,
        "optimizer_steps_per_update": stats["optimizer_steps"],
        "seconds_per_update": round(seconds, 4),
        "tokens_per_s": round(batch * seq_len / seconds, 1),
        "model_flop_per_update": flops["total"],
        "model_tflops_per_s": round(flops["total"] / seconds / 1e12, 1),
        "loss": stats["loss"],
    }
    if peak:
        out["mfu"] = round(flops["total"] / seconds / (peak * 1e12), 4)
    if device.startswith("cuda"):
        out["peak_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    return out


def time_loop(model: Any, prompts: list[list[int]], steps: int, device: str) -> dict[str, Any]:
    import torch

    from agentrl.policy.decode_loop import DecodeLoop
    from agentrl.protocols import SamplingParams

    loop = DecodeLoop(model, eos_token_ids=set(), pad_token_id=0)
    params = SamplingParams(max_new_tokens=steps + 8, temperature=1.0)
    loop.add([(r, p, params, r) for r, p in enumerate(prompts)])
    for _ in range(3):
        loop.step()
    synchronize(device)
    hidden = 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if device.startswith("cuda"):
            torch.cuda.set_sync_debug_mode("warn")
        started = time.perf_counter()
        for _ in range(steps - 3):
            loop.step()
        synchronize(device)
        seconds = time.perf_counter() - started
        if device.startswith("cuda"):
            torch.cuda.set_sync_debug_mode("default")
        hidden = sum("synchroniz" in str(w.message) for w in caught)
    done = {}
    while len(loop):
        done.update(loop.step())
    per_step = seconds / (steps - 3)
    return {
        "ms_per_step": round(1000 * per_step, 2),
        "tokens_per_s": round(len(prompts) / per_step, 1),
        "hidden_syncs_per_step": hidden / (steps - 3),
        "results": done,
    }


def time_generate(model: Any, prompts: list[list[int]], steps: int, device: str) -> dict[str, Any]:
    import torch

    ids = torch.tensor(prompts, device=device)
    kwargs = {"do_sample": True, "top_k": 0, "top_p": 1.0, "temperature": 1.0, "pad_token_id": 0}
    model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=4, **kwargs)  # warm-up
    synchronize(device)
    times = []
    for n in (4, steps):
        started = time.perf_counter()
        model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, min_new_tokens=n, **kwargs)
        synchronize(device)
        times.append(time.perf_counter() - started)
    per_step = (times[1] - times[0]) / (steps - 4)
    return {"ms_per_step": round(1000 * per_step, 2), "tokens_per_s": round(len(prompts) / per_step, 1)}


def logprob_gap(model: Any, prompts: list[list[int]], results: dict) -> dict[str, float]:
    from agentrl.policy.transformers_policy import continuation_logprobs

    diffs = []
    for r, prompt in enumerate(prompts):
        learner = continuation_logprobs(model, [(prompt, results[r].token_ids)], 0)[0]
        diffs += [abs(a - b) for a, b in zip(learner, results[r].logprobs, strict=True)]
    return {"max": max(diffs), "mean": sum(diffs) / len(diffs)}


def measure_sampler(
    path: Path, device: str, rows: list[int], prompt_len: int, steps: int, dtype: str = "bfloat16"
) -> dict[str, Any]:
    """Decoding tokens/s of agentrl's sampler (`DecodeLoop`, the in-process backend's engine) against transformers'
    own batched `generate` (sampling at T = 1, the same prompts and lengths), per number of rows; the loop's hidden
    synchronisations; and the learner's teacher-forced log-probs of what the loop sampled against the sampler's."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype)).to(device).eval()
    rng = random.Random(0)
    out: dict[str, Any] = {"dtype": dtype, "prompt_len": prompt_len, "new_tokens": steps}
    for count in rows:
        prompts = [[rng.randrange(10, 2000) for _ in range(prompt_len)] for _ in range(count)]
        loop = time_loop(model, prompts, steps, device)
        results = loop.pop("results")
        generate = time_generate(model, prompts, steps, device)
        out[f"rows_{count}"] = {
            "agentrl": loop,
            "generate": generate,
            "agentrl_over_generate": round(loop["tokens_per_s"] / generate["tokens_per_s"], 2),
        }
        if count == max(rows):
            out["sampler_learner_logprob_gap"] = logprob_gap(model, prompts, results)
    return out


def measure_training(path: Path, device: str, steps: int, out: Path, tasks: int = 8, group: int = 4) -> dict[str, Any]:
    """`agentrl train` on the code scaffold (`tasks` × `group` episodes a step, ≤ 64 tokens a turn) in a child
    process; the first step (warm-up) is left out of the means when there are others."""
    run = out / "train"
    command = [
        *(sys.executable, "-m", "agentrl", "train", "--model", str(path), "--scaffold", "code"),
        *(f"output_dir={run}", "name=proof", f"trainer.steps={steps}", "eval.every_steps=0", "progress=false"),
        *(f"policy.device={device}", "policy.backend=transformers", f"rollout.prompts_per_step={tasks}"),
        *(f"rollout.samples_per_prompt={group}", "trainer.lr=1e-6"),
        "trainer.skip_zero_advantage_groups=false",  # a random model earns no reward: update on every group
    ]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}
    records = [json.loads(line) for line in (run / "proof" / "metrics.jsonl").read_text().splitlines()]
    timed = [r for r in records if r.get("step", 0) > 1] or [r for r in records if r.get("step", 0) > 0]
    mean = lambda key: sum(r.get(key, 0.0) for r in timed) / max(len(timed), 1)  # noqa: E731
    return {
        "steps": len(records),
        "steps_averaged": len(timed),
        "wall_s": round(time.perf_counter() - started, 1),
        "seconds_per_step": round(mean("time/step_s"), 3),
        "collect_s": round(mean("time/collect_s"), 3),
        "update_s": round(mean("time/update_s"), 3),
        "rollout_tokens_per_s": round(mean("rollout/tokens_per_s"), 1),
        "train_tokens_per_s": round(mean("train/train_tokens_per_s"), 1),
        "sampler_logprob_abs_diff": mean("train/sampler_logprob_abs_diff"),
        "tis_weight": mean("train/tis_weight"),
        "infra_failures": sum(r.get("infra_failures", 0.0) for r in timed),
    }


def measure_bench_trl(device: str, steps: int) -> dict[str, Any]:
    """`agentrl bench trl --device DEVICE`: agentrl and TRL's GRPOTrainer on the same tiny-policy workload."""
    command = [sys.executable, "-m", "agentrl", "bench", "trl", "--device", device, "--steps", str(steps), "--json"]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}
    result = json.loads(done.stdout[done.stdout.index("{") :])
    keep = ("trl_over_agentrl_wall", "trl_over_agentrl_cpu", "reward_not_worse", "meets_target")
    sides = {side: result[side] for side in ("agentrl", "trl") if side in result}
    return {k: result[k] for k in keep if k in result} | {
        side: {k: v for k, v in summary.items() if k.startswith(("median", "mean"))} for side, summary in sides.items()
    }


def measure_fsdp(path: Path, device: str, seq_len: int, batch: int, steps: int) -> dict[str, Any]:
    """The FSDP2 learner (`trainer.sharding=fsdp`, a process group of one) against the unsharded learner on the same
    samples: losses, seconds per update, peak memory, and the largest difference between the fp32 master weights
    they reach."""
    import os

    import torch
    import torch.distributed as dist

    from agentrl.config import PolicyConfig, TrainerConfig
    from agentrl.policy import load_model_and_tokenizer
    from agentrl.train.learner import Learner

    if not dist.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29517")
        dist.init_process_group("nccl" if device.startswith("cuda") else "gloo", rank=0, world_size=1)
    out: dict[str, Any] = {}
    reached: dict[str, dict[str, Any]] = {}
    for sharding in (None, "fsdp"):
        name = sharding or "unsharded"
        model, _ = load_model_and_tokenizer(PolicyConfig(model=str(path), device=device))
        config = TrainerConfig(lr=1e-5, max_tokens_per_microbatch=max(seq_len, 16384), sharding=sharding)
        learner = Learner(model, config, pad_token_id=0)
        samples = synthetic_samples(model.config.vocab_size, seq_len, batch)
        synchronize(device)
        if device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        started = time.perf_counter()
        losses = [learner.update(samples)["loss"] for _ in range(steps)]
        synchronize(device)
        out[name] = {"losses": losses, "seconds_per_update": round((time.perf_counter() - started) / steps, 4)}
        if device.startswith("cuda"):
            out[name]["peak_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
        weights = learner.state_dict()["weights"]
        reached[name] = {k: v.detach().float().cpu() for k, v in weights.items()}
        del learner, model
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    pairs = zip(out["unsharded"]["losses"], out["fsdp"]["losses"], strict=True)
    out["largest_loss_difference"] = max(abs(a - b) for a, b in pairs)
    common = reached["unsharded"].keys() & reached["fsdp"].keys()
    out["weights_compared"] = f"{len(common)} of {len(reached['unsharded'])}"
    out["largest_weight_difference"] = max(
        (float((reached["unsharded"][k] - reached["fsdp"][k]).abs().max()) for k in common), default=None
    )
    return out


def measure_logprob_kernels(device: str, tokens: int, hidden: int, vocab: int, steps: int) -> dict[str, Any]:
    """The learner's chunked log-prob (`agentrl.train.chunked_logprobs`) against trl's fused linear + log-prob
    (`trl.kernels.chunked_logprob.ChunkedLogProbFunction`: online log-sum-exp over vocabulary tiles, a Triton fold
    on CUDA, fp32 accumulation), forward and backward of `tokens` positions through a `vocab` × `hidden` output
    layer in the learner's dtype (bf16 on a GPU): seconds, peak memory, and each one's distance from an fp64
    one-pass reference (log-probs and both gradients, on the first 512 positions)."""
    import torch
    from trl.kernels.chunked_logprob import ChunkedLogProbFunction

    from agentrl.train.chunked_logprobs import chunked_logprobs_N

    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    generator = torch.Generator().manual_seed(0)
    hidden_N_H = (torch.randn(tokens, hidden, generator=generator) / hidden**0.25).to(device, dtype)
    weight_V_H = (torch.randn(vocab, hidden, generator=generator) / hidden**0.25).to(device, dtype)
    targets_N = torch.randint(0, vocab, (tokens,), generator=generator).to(device)
    kernels = {
        "agentrl_chunked": lambda h, w, t: chunked_logprobs_N(h, t, lambda x: x @ w.T, chunk_tokens=4096)[0],
        "trl_fused": lambda h, w, t: ChunkedLogProbFunction.apply(h, w, None, t, 1.0, 4096, None, 1.0, ())[0],
    }

    def grads(kernel: Any, h: torch.Tensor, w: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, ...]:
        h, w = h.detach().requires_grad_(), w.detach().requires_grad_()
        logprobs_N = kernel(h, w, t)
        (logprobs_N * torch.linspace(-1, 1, len(t), device=h.device)).sum().backward()
        return logprobs_N.detach(), h.grad, w.grad

    n = min(tokens, 512)
    reference = grads(
        lambda h, w, t: torch.log_softmax(h @ w.T, -1).gather(1, t[:, None])[:, 0],
        hidden_N_H[:n].double(),
        weight_V_H.double(),
        targets_N[:n],
    )
    out: dict[str, Any] = {"tokens": tokens, "hidden": hidden, "vocab": vocab, "dtype": str(dtype)}
    for name, kernel in kernels.items():
        small = grads(kernel, hidden_N_H[:n], weight_V_H, targets_N[:n])
        errors = {
            f"max_error_{what}": float((a.double() - b).abs().max())
            for what, a, b in zip(("logprobs", "grad_hidden", "grad_weight"), small, reference, strict=True)
        }
        grads(kernel, hidden_N_H, weight_V_H, targets_N)  # warm-up: kernels, allocator
        synchronize(device)
        if device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        times = []
        for _ in range(steps):
            started = time.perf_counter()
            grads(kernel, hidden_N_H, weight_V_H, targets_N)
            synchronize(device)
            times.append(time.perf_counter() - started)
        out[name] = {"seconds": round(sorted(times)[len(times) // 2], 4), **errors}
        if device.startswith("cuda"):
            out[name]["peak_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    out["trl_over_agentrl_seconds"] = round(out["trl_fused"]["seconds"] / out["agentrl_chunked"]["seconds"], 3)
    return out
