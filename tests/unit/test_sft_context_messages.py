"""SFT demonstrations can hold assistant turns that are context only (`"loss": false`): the text is the same, the
loss mask skips them."""

import copy

import pytest

from agentrl.train.sft import training_template

pytestmark = pytest.mark.unit


def call(name, **arguments):
    return {"type": "function", "id": f"call_{name}", "function": {"name": name, "arguments": arguments}}


MESSAGES = [
    {"role": "system", "content": "You fix bugs."},
    {"role": "user", "content": "Fix it."},
    {"role": "assistant", "content": "", "tool_calls": [call("str_replace", old_str="SLIPPED")], "loss": False},
    {"role": "tool", "tool_call_id": "call_str_replace", "content": "old_str does not occur"},
    {"role": "assistant", "content": "", "tool_calls": [call("str_replace", old_str="RIGHT")]},
    {"role": "tool", "tool_call_id": "call_str_replace", "content": "edited"},
    {"role": "assistant", "content": "Done."},
]


@pytest.fixture
def tokenizer(tiny_tokenizer):
    return copy.deepcopy(tiny_tokenizer)  # the shipped template: Qwen2.5's behind the toolless preamble


def targets(tok, template, messages):
    out = tok.apply_chat_template(
        messages, chat_template=template, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
    )
    ids, mask = out["input_ids"], out["assistant_masks"]
    return tok.decode(ids), tok.decode([i for i, m in zip(ids, mask, strict=True) if m])


def test_a_context_only_turn_renders_the_same_and_is_not_a_target(tokenizer):
    template = training_template(tokenizer, context_only=True)
    assert template.startswith("{#- The tiny policy") and tokenizer.chat_template.startswith("{#- The tiny policy")
    text, trained = targets(tokenizer, template, MESSAGES)
    plain = [{k: v for k, v in m.items() if k != "loss"} for m in MESSAGES]
    assert text == tokenizer.apply_chat_template(plain, tokenize=False)
    assert "SLIPPED" in text and "SLIPPED" not in trained
    assert "RIGHT" in trained and "Done." in trained
    _, all_trained = targets(tokenizer, template, plain)
    assert "SLIPPED" in all_trained  # without the flag every assistant turn is a target


def test_a_template_without_a_generation_block_is_refused(tokenizer):
    tokenizer.chat_template = "{% for m in messages %}{{ m.content }}{% endfor %}"
    with pytest.raises(ValueError, match="generation"):
        training_template(tokenizer, context_only=True)
