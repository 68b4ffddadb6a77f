"""`agentrl bench generate`: tokens/s of the in-process sampler with many concurrent trajectories.

The tiny policy, `trajectories` concurrent multi-turn episodes over the bundled code tasks (the real prompts,
rendered by the chat template with the tool schemas; after each turn a fixed tool result is appended), through
`TransformersPolicy.generate`. Four schedules, same prompts, same per-row seeds, in one run:

- alone: one request at a time (`max_batch_size=1`), i.e. each trajectory generated on its own;
- static: requests are batched, but a new request waits until the running batch has drained;
- continuous: a request joins the running decoding loop at its next step;
- continuous_no_reuse: the same, without parked prefixes (`prefix_cache_tokens=0`): every turn prefills its whole
  context, and prompts sharing a system prompt prefill it each.

Each row's randomness is keyed by its own seed and step, so all schedules produce the same tokens (checked: the
bench reports whether they did; a reused prefix changes log-probs only by rounding) and tokens/s compare equal
work. `prefilled_tokens` counts the prompt positions each schedule actually fed to the model.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from agentrl.protocols import SamplingParams

TARGET_SPEEDUP = 3.0
OBSERVATION = "<tool_response>\n42\n</tool_response>"


def _prompts(tokenizer: Any, n: int) -> list[list[int]]:
    from agentrl.registry import load_scaffold
    from agentrl.rollout.chat import ChatFormat
    from agentrl.tool import collect_tools

    scaffold = load_scaffold("code")
    schemas = [t.schema for spec in scaffold.toolsets() for t in collect_tools(_toolset(spec))]
    renderer = ChatFormat(tokenizer, schemas)
    tasks = list(scaffold.tasks("train"))[:n]
    return [renderer.prompt_ids(scaffold.initial_messages(task)) for task in tasks]


def _toolset(spec: Any) -> Any:
    from agentrl.registry import TOOLSETS, import_path

    return import_path(TOOLSETS.get(spec, spec)) if isinstance(spec, str) else spec


async def _episodes(policy: Any, prompts: list[list[int]], turns: int, max_new_tokens: int) -> list[list[int]]:
    tokenizer = policy.tokenizer
    between = tokenizer(
        f"<|im_end|>\n<|im_start|>user\n{OBSERVATION}<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False
    )["input_ids"]

    async def one(i: int, prompt: list[int]) -> list[int]:
        context, sampled = list(prompt), []
        for k in range(turns):
            params = SamplingParams(max_new_tokens=max_new_tokens, temperature=1.0, seed=1000 * i + k)
            completion = await policy.generate(context, params)
            sampled += completion.token_ids
            context += list(completion.token_ids) + (between if completion.finish_reason != "stop" else between[1:])
        return sampled

    return list(await asyncio.gather(*(one(i, p) for i, p in enumerate(prompts))))


def _measure(model: Any, tokenizer: Any, prompts, turns, max_new_tokens, **policy_kwargs) -> tuple[dict, list]:
    from agentrl.policy.transformers_policy import TransformersPolicy

    policy = TransformersPolicy(model, tokenizer, **policy_kwargs)
    fed = [0]
    hook = model.register_forward_pre_hook(lambda _m, _a, kw: _count(fed, kw), with_kwargs=True)
    started = time.perf_counter()
    try:
        samples = asyncio.run(_episodes(policy, prompts, turns, max_new_tokens))
    finally:
        hook.remove()
    seconds = time.perf_counter() - started
    rows = policy.stats.rows
    return {
        "seconds": seconds,
        "tokens": sum(len(s) for s in samples),
        "decode_steps": policy.stats.batches,
        "prefills": policy.stats.prefills,
        "prefilled_tokens": fed[0] - sum(rows),
        "reused_prompt_tokens": policy.prefix_stats.reused_tokens,
        "mean_rows_per_step": round(sum(rows) / max(len(rows), 1), 2),
    }, samples


def _count(fed: list[int], kwargs: dict) -> None:
    fed[0] += kwargs["input_ids"].numel()


MODES = {
    "alone": {"max_batch_size": 1},
    "static": {"continuous": False},
    "continuous": {},
    "continuous_no_reuse": {"prefix_cache_tokens": 0},
}


def run_benchmark(
    trajectories: int = 32,
    turns: int = 2,
    max_new_tokens: int = 64,
    threads: int | None = None,
    repeats: int = 3,
    model_name: str = "tiny",
    device: str = "cpu",
    dtype: str = "float32",
) -> dict[str, Any]:
    """`threads` sets torch's intra-op threads (None: torch's default). The schedules run in turn, `repeats`
    times, and each reports its median time: the machine may be shared, and a single run of a second is noisy.
    `model_name` is `tiny` or a checkpoint directory whose chat template uses Qwen's markup (`scripts/gpu_proof.py`
    saves a random Qwen3 of a real size); `device` and `dtype` place its weights."""
    import statistics

    import torch

    if threads is not None:
        torch.set_num_threads(threads)
    from transformers import AutoModelForCausalLM

    from agentrl.policy import resolve_model_path
    from agentrl.policy.loading import load_tokenizer

    path = resolve_model_path(model_name)
    tokenizer = load_tokenizer(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype)).to(device).eval()
    prompts = _prompts(tokenizer, trajectories)
    runs: dict[str, list[dict]] = {mode: [] for mode in MODES}
    samples = []
    for _ in range(repeats):
        for mode, kwargs in MODES.items():
            result, sampled = _measure(model, tokenizer, prompts, turns, max_new_tokens, **kwargs)
            runs[mode].append(result)
            samples.append(sampled)
    out: dict[str, Any] = {
        "model": model_name,
        "device": str(model.device),
        "dtype": dtype,
        "trajectories": len(prompts),
        "turns": turns,
        "max_new_tokens_per_turn": max_new_tokens,
        "torch_threads": torch.get_num_threads(),
        "repeats": repeats,
    }
    for mode, results in runs.items():
        seconds = statistics.median(r["seconds"] for r in results)
        out[mode] = {
            **{k: v for k, v in results[0].items() if k != "seconds"},
            "median_s": round(seconds, 3),
            "tokens_per_s": round(results[0]["tokens"] / seconds, 1),
            "runs_s": [round(r["seconds"], 3) for r in results],
        }
    out["speedup_vs_alone"] = round(out["continuous"]["tokens_per_s"] / out["alone"]["tokens_per_s"], 2)
    out["speedup_vs_static"] = round(out["continuous"]["tokens_per_s"] / out["static"]["tokens_per_s"], 2)
    out["speedup_of_reuse"] = round(out["continuous"]["tokens_per_s"] / out["continuous_no_reuse"]["tokens_per_s"], 2)
    out["same_tokens"] = all(s == samples[0] for s in samples)
    out["target_speedup_vs_alone"] = TARGET_SPEEDUP
    return out
