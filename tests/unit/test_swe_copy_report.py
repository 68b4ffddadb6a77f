"""agentrl.tiny.build.swe_copy_report: the fix call it scores is the gold patch's, and its teacher-forced argmax
agrees with what greedy decoding of the shipped `tiny-swe` writes."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def script():
    from agentrl.tiny.build import swe_copy_report

    return swe_copy_report


def test_fix_call_is_the_gold_patch_edit(script):
    from agentrl.scaffolds.swe import bundled

    easy = [i for i in bundled.instances() if i.tier == "easy"]
    assert len(easy) >= 20
    for instance in easy:
        call = script.fix_call(instance.problem_statement)
        removed = [line[1:] for line in instance.patch.splitlines() if line.startswith("-") and "---" not in line]
        added = [line[1:] for line in instance.patch.splitlines() if line.startswith("+") and "+++" not in line]
        assert f"a/{call['path']}" in instance.patch, instance.instance_id
        assert any(call["old_str"] in line for line in removed), instance.instance_id
        assert any(call["new_str"] in line for line in added), instance.instance_id
    with pytest.raises(ValueError, match="easy-tier"):
        script.fix_call("Leap years are wrong.")


def test_parts_follow_the_arguments(script):
    call = '{"name": "str_replace", "arguments": {"path": "a.py", "old_str": "x - 1", "new_str": "x + 1"}}'
    parts = [script.part_of(call[:k]) for k in range(len(call))]
    assert parts[call.index('"path"')] == "format"
    assert parts[call.index("a.py")] == "path"
    assert parts[call.index("x - 1")] == "old_str"
    assert parts[call.index("x + 1")] == "new_str"


def test_greedy_exact_is_what_greedy_decoding_writes(script):
    import torch
    from agentrl.scaffolds.swe import bundled
    from transformers import AutoModelForCausalLM

    from agentrl.policy.loading import load_tokenizer, resolve_model_path

    path = resolve_model_path("tiny-swe")
    tokenizer = load_tokenizer(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    tasks = [i for i in bundled.instances() if i.tier == "easy" and i.split == "test"]
    reports = [script.call_report(model, tokenizer, i.instance_id, i.problem_statement) for i in tasks]
    assert {r.greedy_exact for r in reports} == {True, False}  # the shipped policy writes some fixes, not all
    for instance, r in zip(tasks, reports, strict=True):
        assert 0.0 < r.p_call < 1.0 and r.greedy_exact == (not r.misses)
        opening = script.opening(instance.problem_statement)
        prompt = tokenizer.apply_chat_template(opening, add_generation_prompt=True, return_tensors="pt")
        prompt = prompt["input_ids"] if hasattr(prompt, "keys") else prompt
        with torch.no_grad():
            out = model.generate(prompt, do_sample=False, max_new_tokens=160)
        text = tokenizer.decode(out[0, prompt.shape[1] :])
        call = script.fix_call(instance.problem_statement)
        wrote_fix = all(f'"{name}": "{value}"' in text.replace('\\"', '"') for name, value in call.items())
        assert wrote_fix == r.greedy_exact, (instance.instance_id, text)


def test_same_tokens_tells_quotes_and_opening_punctuation(script):
    from agentrl.policy.loading import load_tokenizer, resolve_model_path

    tokenizer = load_tokenizer(resolve_model_path("tiny-extended"))  # punctuation runs
    assert script.same_tokens(tokenizer, "self.ranking()[-1]")
    assert script.same_tokens(tokenizer, "year % 400 != 0")
    assert script.same_tokens(tokenizer, 'name.split(".")[0]')  # but for the backslashes
    assert not script.same_tokens(tokenizer, 'line.split(" ", 3)[3]')  # ` "` in the issue, ` \"` in the call
    assert not script.same_tokens(tokenizer, "(f - 32) * 9 / 5")  # ` "(` opens the call's value


def test_single_punctuation_makes_every_easy_fix_copyable(script):
    """One punctuation mark per pre-token: each easy fix is the issue's tokens in the call, but for backslashes."""
    from agentrl.scaffolds.swe import bundled

    from agentrl.policy.loading import load_tokenizer, resolve_model_path
    from agentrl.tiny.tokenizer import SINGLE_PUNCTUATION_PATTERN, SPLIT_PATTERN, split_punctuation

    assert SINGLE_PUNCTUATION_PATTERN != SPLIT_PATTERN
    tokenizer = load_tokenizer(resolve_model_path("tiny-extended"))
    expressions = [
        call[part]
        for instance in bundled.instances()
        if instance.tier == "easy"
        for call in [script.fix_call(instance.problem_statement)]
        for part in ("old_str", "new_str")
    ]
    runs = [e for e in expressions if not script.same_tokens(tokenizer, e)]
    assert len(runs) >= 10
    split_punctuation(tokenizer)
    assert [e for e in expressions if not script.same_tokens(tokenizer, e)] == []
    assert script.same_tokens(tokenizer, 'name.split(".")[0]') and script.same_tokens(tokenizer, "(f - 32) * 9 / 5")
