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
