"""Policy backends: samplers over token ids behind the `agentrl.protocols.Policy` protocol."""

from agentrl.policy.backends import build_policy
from agentrl.policy.loading import context_window, load_model_and_tokenizer, past_context_warning, resolve_model_path

__all__ = ["build_policy", "context_window", "load_model_and_tokenizer", "past_context_warning", "resolve_model_path"]
