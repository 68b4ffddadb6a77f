"""`build_policy`: the sampler backend a `PolicyConfig` names, over the model and tokenizer already loaded; and
`choose_backend`, what `policy.backend=auto` resolves to here, and why."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from agentrl.errors import ConfigError
from agentrl.policy.config import PolicyConfig
from agentrl.rollout.chat import ChatFormat, ChatSettings, end_of_turn_ids


def build_policy(
    config: PolicyConfig, model: Any, tokenizer: Any, *, compute: Any = None, precision: str | None = None
) -> Any:
    """The sampler backend named by `config.backend`, with the `ChatSettings` its turns are rendered and read
    with (`policy.chat_settings`); `compute` is a context the in-process sampler enters once per decoding session
    (none by default: it computes in its parameters' dtype, the learner's), `precision` the learner's resolved
    precision (a vLLM engine computes in its dtype)."""
    settings = chat_settings(config, tokenizer, model)
    backend, why = choose_backend(config)
    policy = _sampler(config, backend, model, tokenizer, settings, (compute, precision))
    policy.chat_settings = settings
    seeds = "" if getattr(policy, "per_request_seeds", True) else "; per-request seeds off (vLLM's CPU build)"
    policy.backend_note = f"sampler: {backend} ({why}){seeds}"
    return policy


def choose_backend(config: PolicyConfig) -> tuple[str, str]:
    """The backend `config.backend` means on this machine, and why: `auto` is vLLM on a CUDA device when vLLM is
    installed, the in-process transformers sampler otherwise."""
    if config.backend != "auto":
        return config.backend, f"policy.backend={config.backend}"
    if importlib.util.find_spec("vllm") is None:
        return "transformers", "policy.backend=auto: vLLM is not installed"
    import torch

    if config.device == "cpu" or not config.device.startswith(("auto", "cuda")):
        return "transformers", f"policy.backend=auto: policy.device={config.device}"
    if not torch.cuda.is_available():
        return "transformers", "policy.backend=auto: vLLM is installed but there is no CUDA device"
    return "vllm", "policy.backend=auto: vLLM is installed and a CUDA device is present"


def chat_settings(config: PolicyConfig, tokenizer: Any, model: Any = None) -> ChatSettings:
    """How the policy's turns are rendered and read: `policy.chat_template` (which also replaces the tokenizer's,
    so everything that renders with it agrees), `policy.enable_thinking`, `policy.tool_parser`, and every
    end-of-turn id of the model's generation config."""
    if config.chat_template:
        path = Path(config.chat_template)
        if not path.is_file():
            raise ConfigError(f"policy.chat_template: {path} is not a file")
        tokenizer.chat_template = path.read_text()
    kwargs = {} if config.enable_thinking is None else {"enable_thinking": config.enable_thinking}
    settings = ChatSettings(
        tool_format=config.tool_parser,
        template_kwargs=kwargs,
        eos_token_ids=end_of_turn_ids(tokenizer, generation_eos(config, model)),
    )
    ChatFormat(tokenizer, settings=settings)  # an unknown tool_parser fails here, before any rollout
    return settings


def generation_eos(config: PolicyConfig, model: Any = None) -> Any:
    """The `eos_token_id` of the model's generation config (an id, a list, or None), from the loaded model or,
    without one, from the checkpoint's `generation_config.json`."""
    generation = getattr(model, "generation_config", None)
    if generation is None:
        from transformers import GenerationConfig

        from agentrl.policy.loading import resolve_model_path

        try:
            generation = GenerationConfig.from_pretrained(resolve_model_path(config.model), local_files_only=True)
        except OSError:  # no generation config beside the checkpoint: the tokenizer's eos alone
            return None
    return generation.eos_token_id


def engine_dtype(config: PolicyConfig, model: Any, precision: str | None) -> str:
    """The dtype a vLLM engine computes in: `policy.vllm.dtype`, or under `auto` the learner's compute dtype."""
    if config.vllm.dtype != "auto":
        return config.vllm.dtype
    if precision is not None:
        return "float32" if precision == "fp32" else "bfloat16"
    weights = next(iter(model.parameters()), None) if model is not None else None
    return str(weights.dtype).removeprefix("torch.") if weights is not None else "auto"


def _sampler(
    config: PolicyConfig, backend: str, model: Any, tokenizer: Any, settings: ChatSettings, learner: tuple
) -> Any:
    compute, precision = learner
    if backend == "transformers":
        from agentrl.policy.transformers_policy import TransformersPolicy

        return TransformersPolicy(
            model,
            tokenizer,
            max_batch_size=config.max_batch_size,
            batch_wait_ms=config.batch_wait_ms,
            prefix_cache_tokens=config.prefix_cache_tokens,
            eos_token_ids=settings.eos_token_ids,
            **({"compute": compute} if compute is not None else {}),
        )
    if backend == "vllm":
        from agentrl.policy.vllm_environment import check_vllm_environment
        from agentrl.policy.vllm_policy import VLLMPolicy

        check_vllm_environment()
        return VLLMPolicy.from_config(
            config,
            tokenizer,
            source_model=model,
            eos_token_ids=settings.eos_token_ids,
            dtype=engine_dtype(config, model, precision),
        )
    if backend == "openai":
        from agentrl.policy.openai_policy import OpenAICompletionsPolicy

        if not config.base_urls:
            raise ConfigError("policy.backend=openai needs policy.base_url (one URL, or several comma-separated)")
        return OpenAICompletionsPolicy.from_config(config, tokenizer, source_model=model)
    raise ConfigError(f"unknown policy backend {backend!r}")
