"""Shared fixtures. Tests use the real tiny policy's tokenizer and real servers on loopback."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_tokenizer():
    from transformers import AutoTokenizer

    from agentrl.policy import resolve_model_path

    return AutoTokenizer.from_pretrained(resolve_model_path("tiny"))
