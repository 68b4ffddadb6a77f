"""Constrained decoding of forced calls: the JSON-schema grammar reads exactly the values that fit (json.dumps of
valid instances in, misfits and non-JSON out), and every path of tokens `ForcedCall` allows, walked at random over
the tiny policy's vocabulary, ends in a call that parses and fits its schema."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from agentrl.rollout.chat import ChatFormat
from agentrl.serve.forced_call import CallProgram, CallVocabulary, ForcedCall, arguments_error, checked_call
from agentrl.serve.json_grammar import MAX_WS, JsonGrammar
from agentrl.serve.tool_choice import tool_choice_of

pytestmark = pytest.mark.unit

CALCULATE = {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}
LOOKUP = {
    "type": "object",
    "properties": {"entity": {"type": "string"}, "field": {"type": "string", "enum": ["capital", "population"]}},
    "required": ["entity"],
}
MIXED = {
    "type": "object",
    "properties": {
        "n": {"type": "integer"},
        "x": {"type": "number"},
        "flags": {"type": "array", "items": {"type": "boolean"}},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "inner": {"type": "object", "properties": {"k": {"type": "string"}}, "required": ["k"]},
    },
    "required": ["n"],
}
FREE = {"type": "object"}


def accepts(schema: dict, text: str) -> bool:
    grammar = JsonGrammar(schema)
    state = grammar.start()
    for char in text:
        state = grammar.feed(state, char)
        if state is None:
            return False
    return grammar.complete(state)


json_text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
mixed = st.fixed_dictionaries(
    {"n": st.integers(-(10**6), 10**6)},
    optional={
        "x": st.floats(allow_nan=False, allow_infinity=False, width=32),
        "flags": st.lists(st.booleans(), max_size=3),
        "note": st.none() | json_text,
        "inner": st.fixed_dictionaries({"k": json_text}),
    },
)
instances = st.one_of(
    st.tuples(st.just(CALCULATE), st.fixed_dictionaries({"expression": json_text})),
    st.tuples(
        st.just(LOOKUP),
        st.fixed_dictionaries({"entity": json_text}, optional={"field": st.sampled_from(["capital", "population"])}),
    ),
    st.tuples(st.just(MIXED), mixed),
    st.tuples(st.just(FREE), st.dictionaries(json_text, st.integers() | json_text | st.booleans(), max_size=3)),
)


@settings(max_examples=100, deadline=None)
@given(instances, st.booleans(), st.booleans())
def test_every_valid_instance_is_read_whatever_its_spacing(case, compact, ascii_only):
    schema, instance = case
    separators = (",", ":") if compact else (", ", ": ")
    assert accepts(schema, json.dumps(instance, separators=separators, ensure_ascii=ascii_only))


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from([CALCULATE, LOOKUP, MIXED, FREE]),
    st.text(alphabet='{}[]":, 0123456789.-eEtrufalsn\\xyz', max_size=40),
)
def test_whatever_the_grammar_accepts_is_json_that_fits(schema, text):
    if accepts(schema, text):
        assert not list(Draft202012Validator(schema).iter_errors(json.loads(text))), text


def test_misfits_are_refused():
    assert not accepts(CALCULATE, '{"": "991 - 456"}')  # what the unconstrained tiny policy once wrote
    assert not accepts(CALCULATE, "{}")  # a required key missing
    assert not accepts(CALCULATE, '{"expression": 3}')
    assert not accepts(CALCULATE, '{"expression": "a", "expression": "b"}')  # a key twice
    assert not accepts(LOOKUP, '{"entity": "Quell", "field": "size"}')  # outside the enum
    assert not accepts(MIXED, '{"n": 1.5}') and not accepts(MIXED, '{"n": 01}')
    assert not accepts(CALCULATE, '{"expression": "a\nb"}')  # a raw newline is not JSON
    assert not accepts(CALCULATE, "{" + " " * (MAX_WS + 1) + '"expression": "x"}')  # no endless whitespace
    assert accepts(LOOKUP, '{"field": "capital", "entity": "Q"}')


def forced_call(tokenizer, schema: dict) -> tuple[ForcedCall, ChatFormat, object]:
    tools = [{"type": "function", "function": {"name": "calc", "description": "d", "parameters": schema}}]
    chat = ChatFormat(tokenizer, tools)
    choice = tool_choice_of({"type": "function", "function": {"name": "calc"}}, tools, chat)
    before = choice.markup[len(choice.forced) :].rstrip()
    program = CallProgram(before, schema, chat.tool_format.closing)
    return ForcedCall(CallVocabulary(tokenizer), program, chat.eos_token_ids), chat, (choice, tools)


@pytest.mark.parametrize("schema", [CALCULATE, LOOKUP, MIXED])
def test_every_path_the_constraint_allows_ends_in_a_call_that_fits(tiny_tokenizer, schema):
    constraint, chat, (choice, tools) = forced_call(tiny_tokenizer, schema)
    eos = set(chat.eos_token_ids)
    rng = random.Random(0)
    for _ in range(6):
        ids: list[int] = []
        while not ids or ids[-1] not in eos:
            allowed = sorted(constraint.vocabulary.all_ids - constraint(ids))
            assert allowed, tiny_tokenizer.decode(ids)
            ids.append(rng.choice(allowed) if rng.random() < 0.5 or len(ids) > 60 else min(allowed))
            if len(ids) > 200:  # a long free string: close it the quickest way the constraint allows
                break
        if ids[-1] not in eos:
            continue
        text = choice.forced + tiny_tokenizer.decode(ids[:-1], skip_special_tokens=False)
        parsed = chat.parse(text)
        assert parsed.error is None and len(parsed.tool_calls) == 1, text
        assert arguments_error(schema, parsed.tool_calls[0].arguments) is None, text
        assert checked_call(parsed, choice, tools) is parsed


def test_a_forced_call_that_does_not_fit_is_not_returned_as_a_call(tiny_tokenizer):
    _, chat, (choice, tools) = forced_call(tiny_tokenizer, CALCULATE)
    parsed = chat.parse(choice.forced + ' {"": "991 - 456"}}\n</tool_call>')
    assert parsed.error is None and parsed.tool_calls  # the markup parses...
    checked = checked_call(parsed, choice, tools)
    assert not checked.tool_calls and "do not fit its schema" in checked.error  # ...the arguments do not fit
