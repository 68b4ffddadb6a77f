"""`agentrl doctor`'s fast checks on crafted tokenizers: a template that is not prefix-preserving and a missing
end-of-turn id are flagged; the fixed tokenizers pass."""

from __future__ import annotations

import pytest
from trl.chat_template_utils import qwen3_training_chat_template

from agentrl.doctor.chat_checks import chat_checks
from agentrl.rollout.chat import ChatSettings
from agentrl.testing.families import FAMILIES, family_tokenizer

pytestmark = pytest.mark.unit


def verdicts(tokenizer, *eos_tokens: str, **settings) -> dict[str, str]:
    ids = tuple(tokenizer.convert_tokens_to_ids(t) for t in eos_tokens)
    return {v.check: v.status for v in chat_checks(tokenizer, ChatSettings(eos_token_ids=ids, **settings))}


def test_a_template_that_rewrites_history_is_flagged_and_its_training_variant_passes():
    tokenizer = family_tokenizer("qwen3")
    assert verdicts(tokenizer, "<|im_end|>")["prefix"] == "warn"
    tokenizer.chat_template = qwen3_training_chat_template
    found = verdicts(tokenizer, "<|im_end|>")
    assert found["prefix"] == "ok" and set(found.values()) == {"ok"}


def test_a_missing_end_of_turn_id_fails_and_adding_it_passes():
    tokenizer = family_tokenizer("qwen2")
    broken = verdicts(tokenizer, "<|endoftext|>")
    assert broken["end of turn"] == "fail" and broken["scripted episode"] == "fail"
    assert set(verdicts(tokenizer, "<|endoftext|>", "<|im_end|>").values()) == {"ok"}


def test_every_family_passes_with_its_own_settings():
    for name, family in FAMILIES.items():
        found = verdicts(family_tokenizer(name), *family.generation_eos)
        assert "fail" not in found.values(), (name, found)
        assert found["tool calls"] == "ok" and found["scripted episode"] == "ok", name


def test_a_template_without_tool_markup_is_flagged_until_the_format_is_named():
    tokenizer = family_tokenizer("qwen2")
    tokenizer.chat_template = tokenizer.chat_template.replace("<tool_call>", "<call>").replace(
        "</tool_call>", "</call>"
    )
    assert verdicts(tokenizer, "<|im_end|>")["tool calls"] == "warn"
    assert verdicts(tokenizer, "<|im_end|>", tool_format="hermes")["tool calls"] == "ok"


def test_no_template_is_a_failure():
    tokenizer = family_tokenizer("qwen2")
    tokenizer.chat_template = None
    assert verdicts(tokenizer, "<|im_end|>") == {"template": "fail"}


@pytest.mark.parametrize("template", ["gemma4_chat_template", "gptoss_chat_template", "glm4moe_chat_template"])
def test_a_template_whose_calls_no_parser_reads_fails_before_training(template):
    """Gemma 4, gpt-oss and GLM-4.5 write calls in markup none of the parsers reads: assuming Hermes would book
    every call the model writes as malformed, so the check fails (a configured parser only warns)."""
    import trl.chat_template_utils

    tokenizer = family_tokenizer("qwen3")
    tokenizer.chat_template = getattr(trl.chat_template_utils, template)
    assert verdicts(tokenizer, "<|im_end|>")["call markup"] == "fail"
    assert verdicts(tokenizer, "<|im_end|>", tool_format="hermes")["call markup"] == "warn"


@pytest.mark.parametrize(
    ("template", "family"),
    [
        *[(f"{name}_chat_template", "qwen3") for name in ("qwen2_5", "qwen3", "qwen3_instruct_2507", "qwen3_5_think")],
        *[(f"{name}_chat_template", "qwen3") for name in ("qwen3_5_nothink", "qwen3_6", "qwen3_8")],
        *[(f"nemotron_3_{size}_chat_template", "qwen3") for size in ("nano", "super", "ultra")],
        ("llama3_1_chat_template", "llama3"),
        ("llama3_2_chat_template", "llama3"),
        ("lfm2_v2_chat_template", "lfm2"),
        ("lfm2_2_5_chat_template", "lfm2"),
    ],
)
def test_the_templates_own_calls_parse_for_the_families_trl_ships(template, family):
    """The families docs/bring_your_own_model.md lists as read: each template's own calls parse back."""
    import trl.chat_template_utils

    tokenizer = family_tokenizer(family)
    tokenizer.chat_template = getattr(trl.chat_template_utils, template)
    found = verdicts(tokenizer, *FAMILIES[family].generation_eos)
    assert found["tool calls"] == "ok" and found["call markup"] == "ok", found
