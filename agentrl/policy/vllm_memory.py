"""How much of the GPU an in-process vLLM engine may take when the learner shares the GPU with it.

vLLM sizes its engine as a share of the whole device (`gpu_memory_utilization`) and refuses to start when less than
that share is free. Colocated with the learner, what is free when the engine starts (the first collect) is the
device less the learner's weights, and the learner's first update still has to allocate its gradients and optimizer
state, which stay allocated for the rest of the run, beside the engine. So the share the engine can have is

    (free now − what the learner will still allocate − a margin) / total

where the learner's future allocation is, per trainable parameter, its fp32 gradient and AdamW's two fp32 moments
(12 bytes), plus activation headroom. With `sleep_between_steps` the engine releases its memory while the learner
updates, so gradients and activations come and go in that time, and only the optimizer state (8 bytes per trainable
parameter) has to fit beside the engine.

`engine_memory_share` is that arithmetic (pure); `fit_engine_memory` reads the device and the learner and returns
the engine arguments to start with, or a `ConfigError` whose one line names the setting to change.
"""

from __future__ import annotations

from typing import Any

from agentrl.errors import ConfigError

GIB = 1 << 30
MIN_SHARE = 0.05
"""Below this the engine holds its weights and next to no KV cache: refuse rather than start it."""
ACTIVATION_SHARE = 0.10
"""Headroom left for the learner's activations (of the whole device) when the engine stays awake in updates."""
MARGIN_BYTES = GIB // 2
"""What CUDA's context, allocator fragmentation and NCCL buffers take beyond the tensors counted."""
SETTING = "policy.vllm.gpu_memory_utilization"


def learner_future_bytes(trainable_params: int, *, sleeps: bool, total_bytes: int) -> int:
    """What the learner has yet to allocate beside the engine: its optimizer state, and unless the engine sleeps
    through updates, its gradients and activation headroom too."""
    if sleeps:
        return 8 * trainable_params
    return 12 * trainable_params + int(ACTIVATION_SHARE * total_bytes)


def engine_memory_share(
    total_bytes: int, free_bytes: int, trainable_params: int, *, sleeps: bool, requested: float | None
) -> float:
    """The `gpu_memory_utilization` to start the engine with: `requested` when it fits, else the share computed
    above; raises `ConfigError` when it cannot fit."""
    learner = learner_future_bytes(trainable_params, sleeps=sleeps, total_bytes=total_bytes)
    room = free_bytes - learner - MARGIN_BYTES
    share = room / total_bytes
    if requested is not None:
        if requested * total_bytes > free_bytes:
            raise ConfigError(
                f"{SETTING}={requested:g} asks for {requested * total_bytes / GIB:.1f} GiB but "
                f"{free_bytes / GIB:.1f} GiB of {total_bytes / GIB:.1f} GiB are free with the learner loaded: lower "
                f"it (about {max(share, 0):.2f} leaves the learner room for its update) or leave it unset to have it "
                "computed"
            )
        return requested
    if share < MIN_SHARE:
        hint = "" if sleeps else ", set policy.vllm.sleep_between_steps=true,"
        raise ConfigError(
            f"the vLLM engine cannot fit beside the learner: {free_bytes / GIB:.1f} GiB of {total_bytes / GIB:.1f} GiB "
            f"are free and the learner's update needs about {learner / GIB:.1f} GiB more; train with LoRA "
            f"(policy.lora_rank){hint} or serve the model on another GPU (policy.backend=openai); {SETTING} "
            "forces a share"
        )
    return round(min(share, 0.95), 3)


def fit_engine_memory(engine_kwargs: dict[str, Any], requested: float | None, learner: Any, sleeps: bool) -> dict:
    """`engine_kwargs` with the `gpu_memory_utilization` that fits beside `learner` on the current CUDA device;
    unchanged off CUDA (vLLM's CPU build sizes its KV cache with $VLLM_CPU_KVCACHE_SPACE instead)."""
    import torch

    if not torch.cuda.is_available():
        return {k: v for k, v in engine_kwargs.items() if k != "gpu_memory_utilization"} | (
            {"gpu_memory_utilization": requested} if requested is not None else {}
        )
    params = list(learner.parameters()) if learner is not None else []
    on_gpu = bool(params) and params[0].device.type == "cuda"  # a learner on the CPU takes none of the GPU
    free, total = torch.cuda.mem_get_info(params[0].device if on_gpu else torch.cuda.current_device())
    trainable = sum(p.numel() for p in params if p.requires_grad) if on_gpu else 0
    share = engine_memory_share(total, free, trainable, sleeps=sleeps, requested=requested)
    return {**engine_kwargs, "gpu_memory_utilization": share}
