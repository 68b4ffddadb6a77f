"""Policy backends: samplers over token ids behind the `agentrl.protocols.Policy` protocol."""

from agentrl.policy.loading import build_policy, context_window, load_model_and_tokenizer, resolve_model_path

__all__ = ["build_policy", "context_window", "load_model_and_tokenizer", "resolve_model_path"]
