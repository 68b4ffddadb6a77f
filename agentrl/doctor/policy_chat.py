"""A policy's chat read without its weights: its tokenizer and chat settings (`tokenizer_and_settings`), and its
model config too (`policy_chat`), for the checks of `model_doctor.py` and `tool_visibility.py`."""

from __future__ import annotations

from typing import Any

from agentrl.policy.config import PolicyConfig


def tokenizer_and_settings(config: PolicyConfig) -> tuple[Any, Any]:
    """The tokenizer and chat settings of the policy `config` names, without its weights."""
    from agentrl.policy.backends import chat_settings
    from agentrl.policy.loading import load_tokenizer, resolve_model_path

    try:
        tokenizer = load_tokenizer(resolve_model_path(config.model), local_files_only=config.local_files_only)
    except OSError as e:
        raise FileNotFoundError(
            f"could not load the tokenizer of {config.model!r} from a local path, the local hub cache or the hub: {e}"
        ) from e
    return tokenizer, chat_settings(config, tokenizer)


def policy_chat(policy: Any) -> tuple[Any, Any, Any]:
    """(tokenizer, chat settings, model config) of the policy a `PolicyConfig` names, without its weights."""
    from transformers import AutoConfig

    from agentrl.policy.loading import resolve_local_files_only, resolve_model_path

    tokenizer, settings = tokenizer_and_settings(policy)
    try:
        local = resolve_local_files_only(policy.local_files_only)
        model_config = AutoConfig.from_pretrained(resolve_model_path(policy.model), local_files_only=local)
    except (OSError, ValueError):
        model_config = None
    return tokenizer, settings, model_config
