"""Which route a model name takes: with a base URL always the OpenAI-compatible one, the name unchanged; litellm
only without one, for `provider/model` names; and litellm is imported in one place only (`import_litellm`, which
keeps it off the network)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from agentrl.judge import Judge
from agentrl.policy.chat_policy import OpenAIChatPolicy, uses_litellm

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
HELPER = ROOT / "agentrl" / "policy" / "chat_policy.py"


@pytest.mark.parametrize(
    ("model", "base_url", "litellm"),
    [
        ("Qwen/Qwen3-4B", "http://127.0.0.1:8000/v1", False),
        ("openai/gpt-oss-20b", "http://127.0.0.1:8000/v1", False),
        ("scripted", "http://127.0.0.1:8000/v1", False),
        ("anthropic/claude-sonnet-4", None, True),
        ("gpt-4o", None, False),
        ("./checkpoints/step_10", None, False),
    ],
)
def test_a_base_url_always_takes_the_openai_compatible_route(model, base_url, litellm):
    assert uses_litellm(model, base_url) is litellm
    assert OpenAIChatPolicy(model, base_url=base_url).litellm is litellm


@pytest.mark.parametrize(
    ("model", "sent"),
    [
        ("judge-model", "openai/judge-model"),
        ("Qwen/Qwen3-4B", "openai/Qwen/Qwen3-4B"),  # litellm strips `openai/`: the server gets Qwen/Qwen3-4B
        ("openai/judge", "openai/judge"),
    ],
)
def test_a_judge_with_a_base_url_uses_litellms_openai_compatible_route(model, sent):
    assert Judge(model, base_url="http://127.0.0.1:9/v1").endpoint()[0] == sent


def test_a_judge_without_a_base_url_names_its_provider(monkeypatch):
    monkeypatch.delenv("AGENTRL_JUDGE_BASE_URL", raising=False)
    assert Judge("anthropic/claude-sonnet-4").endpoint()[0] == "anthropic/claude-sonnet-4"


def test_litellm_is_imported_only_through_the_helper():
    importers = []
    for directory in ("agentrl", "tools", "scaffolds", "rewards"):
        for path in (ROOT / directory).rglob("*.py"):
            if "repos" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom):
                    names = [node.module or ""]
                else:
                    continue
                if any(n == "litellm" or n.startswith("litellm.") for n in names):
                    importers.append(path.relative_to(ROOT))
    assert importers == [HELPER.relative_to(ROOT)]
