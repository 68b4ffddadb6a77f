"""`build_policy`: the sampler backend a `PolicyConfig` names, over the model and tokenizer already loaded."""

from __future__ import annotations

from typing import Any

from agentrl.errors import ConfigError, DependencyError
from agentrl.policy.config import PolicyConfig


def build_policy(config: PolicyConfig, model: Any, tokenizer: Any) -> Any:
    """The sampler backend named by `config.backend`."""
    if config.backend == "transformers":
        from agentrl.policy.transformers_policy import TransformersPolicy

        return TransformersPolicy(
            model, tokenizer, max_batch_size=config.max_batch_size, batch_wait_ms=config.batch_wait_ms
        )
    if config.backend == "vllm":
        try:
            import vllm  # noqa: F401
        except ImportError as e:
            raise DependencyError(
                "policy.backend=vllm needs vLLM: pip install 'agentrl[vllm]' (on a GPU machine)"
            ) from e
        from agentrl.policy.vllm_policy import VLLMPolicy

        return VLLMPolicy.from_config(config, tokenizer, source_model=model)
    if config.backend == "openai":
        from agentrl.policy.openai_policy import OpenAICompletionsPolicy

        if not config.base_url:
            raise ConfigError("policy.backend=openai needs policy.base_url")
        return OpenAICompletionsPolicy.from_config(config, tokenizer)
    raise ConfigError(f"unknown policy backend {config.backend!r}")
