"""Shared fixtures. Tests use the real tiny policy's tokenizer and real servers on loopback."""

from __future__ import annotations

import os

import pytest

# litellm fetches a model price map from the internet at import unless told to use its bundled copy
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# nothing a test loads may come from the network: models and datasets are read from local paths and caches only
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


@pytest.fixture(scope="session")
def tiny_tokenizer():
    from agentrl.policy import resolve_model_path
    from agentrl.policy.loading import load_tokenizer

    return load_tokenizer(resolve_model_path("tiny"))


@pytest.fixture(scope="module")
def small_qwen2():
    """A random two-layer Qwen2 over the tiny vocabulary, on one torch thread (a model this small gains nothing from
    more, and the machine is shared): eos is as likely as any other token, so its rows run long enough to overlap."""
    import torch

    from agentrl.tiny.model import tiny_qwen2, tiny_qwen2_config

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield tiny_qwen2(tiny_qwen2_config(512, hidden_size=64, num_hidden_layers=2), seed=3).eval()
    torch.set_num_threads(threads)
