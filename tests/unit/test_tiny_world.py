"""The tiny world: bundled code/search tasks, their tools and experts, the tokenizer and the shipped policy."""

from __future__ import annotations

import random

import pytest
from agentrl.scaffolds.code import expert as code_expert
from agentrl.scaffolds.code import tasks as code_tasks
from agentrl.scaffolds.code.tools import calculate
from agentrl.scaffolds.search import expert as search_expert
from agentrl.scaffolds.search import tasks as search_tasks
from agentrl.scaffolds.search.tools import lookup
from agentrl.scaffolds.search.world import FIELDS, build_world, world

SCAFFOLDS = {"code": (code_tasks, code_expert), "search": (search_tasks, search_expert)}


@pytest.fixture(params=list(SCAFFOLDS))
def scaffold(request):
    return SCAFFOLDS[request.param]


def test_tasks_are_deterministic(scaffold):
    tasks, _ = scaffold
    first = {split: tasks.tasks(split) for split in ("train", "test")}
    tasks._all_tasks.cache_clear()
    assert {split: tasks.tasks(split) for split in ("train", "test")} == first


def test_task_sets_have_the_advertised_shape(scaffold):
    tasks, _ = scaffold
    train, test = tasks.tasks("train"), tasks.tasks("test")
    assert len(train) >= 2000 and len(test) == {"code": 200, "search": 80}[test[0].scaffold]
    for split, group in (("train", train), ("test", test)):
        assert [t.id for t in group] == [f"{t.scaffold}/{split}/{i:05d}" for i, t in enumerate(group)]
        assert all(t.split == split and t.answer and t.metadata["tier"] in ("easy", "medium") for t in group)
    with pytest.raises(ValueError):
        tasks.tasks("validation")


def test_splits_are_disjoint(scaffold):
    tasks, _ = scaffold
    train, test = tasks.tasks("train"), tasks.tasks("test")
    assert not {t.prompt for t in train} & {t.prompt for t in test}
    assert len({t.prompt for t in train}) == len(train)


def test_search_test_questions_are_about_unseen_subjects():
    train_subjects = {t.metadata["subject"] for t in search_tasks.tasks("train")}
    assert not train_subjects & {t.metadata["subject"] for t in search_tasks.tasks("test")}


def test_perfect_expert_answers_every_task(scaffold):
    tasks, expert = scaffold
    rng = random.Random(0)
    for task in tasks.tasks("train") + tasks.tasks("test"):
        messages = expert.demonstration(task, rng, mistake_rate=0.0)
        assert messages[-1] == {"role": "assistant", "content": task.answer}
        assert any(m.get("tool_calls") for m in messages), "a perfect expert always uses its tool"


def test_imperfect_expert_is_wrong_exactly_when_it_slips(scaffold):
    tasks, expert = scaffold
    rng = random.Random(1)
    wrong = sum(expert.demonstration(t, rng, mistake_rate=1.0)[-1]["content"] != t.answer for t in tasks.tasks("test"))
    assert wrong >= len(tasks.tasks("test")) - 5  # a miscopied operand can, rarely, give the same value


def _tool_calls(messages):
    for i, message in enumerate(messages):
        for call in message.get("tool_calls", []):
            reply = next(m for m in messages[i + 1 :] if m.get("tool_call_id") == call["id"])
            yield call, reply


@pytest.mark.parametrize("mistake_rate", [0.0, 1.0])
async def test_demo_tool_calls_match_the_schemas_and_the_tools(scaffold, mistake_rate):
    tasks, expert = scaffold
    by_name = {t.name: t for t in tasks.TOOLS}
    rng = random.Random(2)
    for task in tasks.tasks("test")[:100]:
        messages = expert.demonstration(task, rng, mistake_rate=mistake_rate)
        assert messages[0] == {"role": "system", "content": tasks.SYSTEM_PROMPT}
        for call, reply in _tool_calls(messages):
            tool = by_name[call["function"]["name"]]
            arguments = call["function"]["arguments"]
            schema = tool.schema["function"]["parameters"]
            assert set(arguments) == set(schema["properties"]) == set(schema["required"])
            result = await tool.call(arguments, call_id=call["id"])
            assert not result.is_error and result.text == reply["content"]
            assert reply["name"] == tool.name


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("4821 * 37", "178377"),
        ("(382 + 1947) * 12", "27948"),
        ("7 / 2", "3.5"),
        ("10 / 4 * 2", "5"),
        ("-3 ** 2", "-9"),
        ("17 // 5 + 17 % 5", "5"),
        ("2 ** 10", "1024"),
        ("1 / 3", "0.333333"),
        ("2.5 * 4", "10"),
    ],
)
def test_calculate(expression, value):
    assert calculate(expression) == value


@pytest.mark.parametrize("expression", ["__import__('os')", "x + 1", "2 ** 1000", "9 ** 9 ** 9", "1 / 0", "", "[1]"])
def test_calculate_refuses_anything_else(expression):
    with pytest.raises(ValueError):
        calculate(expression)


async def test_calculate_errors_are_results():
    result = await calculate.call({"expression": "open('x')"})
    assert result.is_error and "unsupported" in result.text


def test_lookup_follows_the_world():
    kb = world()
    company = kb.of_kind("company")[0]
    founder = lookup(company.name, "founder")
    assert founder == company.facts["founder"] and kb.entities[founder].kind == "person"
    assert lookup(f"  {company.name.upper()} ", "headquarters") == company.facts["headquarters"]
    assert build_world() == kb  # regenerating gives the same world


def test_lookup_errors_help_recovery():
    name = world().of_kind("company")[0].name
    with pytest.raises(ValueError, match=f"did you mean {name}"):
        lookup(name[:-1] + "q", "founder")
    with pytest.raises(ValueError, match=", ".join(FIELDS["company"])):
        lookup(name, "mayor")


def test_tokenizer_keeps_digit_chunks_and_markers_whole():
    from agentrl.tiny.tokenizer import NUMBER_CHUNKS, SPECIAL_TOKENS, TOOL_TOKENS, render, train_tokenizer

    rng = random.Random(0)
    texts = []
    for tasks, expert in SCAFFOLDS.values():
        schemas = [t.schema for t in tasks.TOOLS]
        texts += [render(expert.demonstration(t, rng, mistake_rate=0.3), schemas) for t in tasks.tasks("train")[:200]]
    tokenizer = train_tokenizer(texts, vocab_size=2560)
    assert train_tokenizer(texts, vocab_size=2560).get_vocab() == tokenizer.get_vocab()
    assert [tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS] == [0, 1, 2]
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token == "<|endoftext|>"
    for text in texts[:5] + texts[-5:]:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert tokenizer.decode(ids) == text
        pieces = [tokenizer.decode([i]) for i in ids]
        digit_pieces = [p for p in pieces if any(c.isdigit() for c in p)]
        assert all(p.isdigit() and len(p) <= 3 for p in digit_pieces)
    # numbers split into chunks of three from the left, each chunk one token
    pieces = [tokenizer.decode([i]) for i in tokenizer("x 1234567 0042", add_special_tokens=False)["input_ids"]]
    assert pieces == ["x", " ", "123", "456", "7", " ", "004", "2"]
    assert all(len(tokenizer(c, add_special_tokens=False)["input_ids"]) == 1 for c in NUMBER_CHUNKS)
    with pytest.raises(ValueError, match="digit chunks"):
        train_tokenizer(texts, vocab_size=800)
    for marker in TOOL_TOKENS + SPECIAL_TOKENS:
        assert len(tokenizer(marker, add_special_tokens=False)["input_ids"]) == 1
    assert "<tool_call>" in tokenizer.decode(tokenizer("<tool_call>x")["input_ids"], skip_special_tokens=True)


def test_shipped_policy_loads_with_short_prompts():
    import torch
    from transformers import AutoModelForCausalLM

    from agentrl.policy.loading import load_tokenizer
    from agentrl.tiny import POLICY_DIR

    if not (POLICY_DIR / "config.json").exists():
        pytest.skip("the tiny policy has not been built (python -m agentrl.tiny.build)")
    tokenizer = load_tokenizer(str(POLICY_DIR))
    # the tokenizer.json's digit chunks, not the ones transformers' Qwen2 class would impose
    assert tokenizer.tokenize("12345") == ["123", "45"]
    model = AutoModelForCausalLM.from_pretrained(POLICY_DIR, dtype=torch.float32)
    assert model.config.vocab_size == len(tokenizer) and model.config.eos_token_id == tokenizer.eos_token_id
    assert sum(p.numel() for p in model.parameters()) < 5_000_000
    for tasks, _ in SCAFFOLDS.values():
        messages = [{"role": "system", "content": tasks.SYSTEM_PROMPT}, {"role": "user", "content": ""}]
        messages[1]["content"] = max((t.prompt for t in tasks.tasks("test")), key=len)
        schemas = [t.schema for t in tasks.TOOLS]
        ids = tokenizer.apply_chat_template(messages, tools=schemas, add_generation_prompt=True, return_dict=False)
        assert len(ids) <= 260
