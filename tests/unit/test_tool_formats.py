"""The tool-call formats of model families: well-formed calls parse exactly (the same calls transformers' response
parsing reads with trl's schemas), malformed ones come back as errors, and no text makes a parser raise or lets
through a value that would fail later (NaN, lone surrogates, deep nesting, huge integers)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentrl.json_values import MAX_DEPTH, JSONValueError, check_encodable, loads
from agentrl.rollout.chat import FORMATS, detect
from agentrl.testing.families import FAMILIES, family_template

pytestmark = pytest.mark.unit

SCHEMAS = [
    {
        "type": "function",
        "function": {
            "name": "f",
            "parameters": {
                "type": "object",
                "properties": {
                    "n": {"type": "integer"},
                    "x": {"type": "number"},
                    "ok": {"type": "boolean"},
                    "items": {"type": "array"},
                    "spec": {"type": "object"},
                    "text": {"type": "string"},
                },
            },
        },
    }
]


def test_each_family_template_names_its_format():
    expected = {
        "qwen2": "hermes",
        "qwen3": "hermes",
        "qwen3_coder": "qwen3_coder",
        "llama3": "llama3_json",
        "llama3_2": "llama3_json",
        "mistral": "mistral",
        "lfm2": "pythonic",
    }
    assert {name: detect(family_template(f)).name for name, f in FAMILIES.items()} == expected
    assert detect("{{ messages }}") is None


@pytest.mark.parametrize(
    "fmt, text",
    [
        ("hermes", 'Sure.\n<tool_call>\n{"name": "f", "arguments": {"n": 3}}\n</tool_call>'),
        ("qwen3_coder", "Sure.\n<tool_call>\n<function=f>\n<parameter=n>\n3\n</parameter>\n</function>\n</tool_call>"),
        ("llama3_json", '{"name": "f", "parameters": {"n": 3}}'),
        ("llama3_json", '<|python_tag|>{"name": "f", "arguments": {"n": 3}}'),
        ("mistral", 'Sure.[TOOL_CALLS] [{"name": "f", "arguments": {"n": 3}}]'),
        ("mistral", 'Sure.[TOOL_CALLS]f[ARGS]{"n": 3}'),
        ("pythonic", "Sure.<|tool_call_start|>[f(n=3)]<|tool_call_end|>"),
    ],
)
def test_one_call_in_each_format(fmt, text):
    parsed = FORMATS[fmt].parse(text, id_prefix="c", schemas=SCHEMAS)
    assert parsed.error is None and [(c.name, c.arguments) for c in parsed.tool_calls] == [("f", {"n": 3})]
    assert parsed.content in ("Sure.", "")


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_a_written_call_parses_back(fmt):
    arguments = {"n": 3, "text": "a b", "items": [1, 2], "spec": {"a": 1}}
    parsed = FORMATS[fmt].parse(FORMATS[fmt].write("f", arguments), schemas=SCHEMAS)
    assert parsed.error is None and [(c.name, c.arguments) for c in parsed.tool_calls] == [("f", arguments)]


def test_xml_parameters_are_typed_by_the_schema():
    body = {
        "n": "42",
        "x": "2.5",
        "ok": "true",
        "items": "[1, 2]",
        "spec": '{"a": 1}',
        "text": "42\nline two",
        "unknown": "7",
    }
    params = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in body.items())
    parsed = FORMATS["qwen3_coder"].parse(
        f"<tool_call>\n<function=f>\n{params}</function>\n</tool_call>", schemas=SCHEMAS
    )
    assert parsed.error is None
    assert parsed.tool_calls[0].arguments == {
        "n": 42,
        "x": 2.5,
        "ok": True,
        "items": [1, 2],
        "spec": {"a": 1},
        "text": "42\nline two",
        "unknown": "7",
    }


@pytest.mark.parametrize(
    "family, text",
    [
        ("qwen2", 'I will.\n<tool_call>\n{"name": "f", "arguments": {"n": 3, "text": "a b"}}\n</tool_call>'),
        ("qwen3", '<think>\nHm.\n</think>\n\n<tool_call>\n{"name": "f", "arguments": {"n": 3}}\n</tool_call>'),
        (
            "qwen3_coder",
            "Hm.\n</think>\n\n<tool_call>\n<function=f>\n<parameter=n>\n3\n</parameter>\n</function>\n</tool_call>",
        ),
        ("llama3", '{"name": "f", "parameters": {"n": 3, "text": "a b"}}'),
    ],
)
def test_calls_agree_with_transformers_response_parsing(family, text):
    """transformers' `parse_response` with trl's response schemas is the reference reader of these formats."""
    from trl.chat_template_utils import add_response_schema, parse_response

    from agentrl.rollout.chat import ChatFormat
    from agentrl.testing.families import family_tokenizer

    tokenizer = add_response_schema(family_tokenizer(family))
    prefix = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tools=SCHEMAS, add_generation_prompt=True, tokenize=True, return_dict=False
    )
    ids = tokenizer(text + tokenizer.eos_token, add_special_tokens=False)["input_ids"]
    reference = parse_response(tokenizer, ids, prefix=prefix, tools=SCHEMAS)
    parsed = ChatFormat(tokenizer, SCHEMAS).parse(text)
    expected = [(c["function"]["name"], c["function"]["arguments"]) for c in reference["tool_calls"]]
    assert parsed.error is None and [(c.name, c.arguments) for c in parsed.tool_calls] == expected
    assert parsed.content == (reference.get("content") or "").strip()
    assert (parsed.reasoning or None) == (reference.get("reasoning_content") or None)


@pytest.mark.parametrize(
    "fmt, text, fragment",
    [
        ("hermes", '<tool_call>{"name": "f", "arguments": {"n": NaN}}</tool_call>', "NaN is not a JSON number"),
        ("hermes", '<tool_call>{"name": "f", "arguments": {"n": Infinity}}</tool_call>', "Infinity"),
        ("hermes", '<tool_call>{"name": "f", "arguments": {"s": "\\ud800"}}</tool_call>', "surrogate"),
        ("hermes", '<tool_call>{"name": "f", "arguments": {"n": ' + "9" * 5000 + "}}</tool_call>", "digits"),
        ("hermes", '<tool_call>{"name": "f", "arguments": ' + "[" * 900 + "]" * 900 + "}</tool_call>", "nested"),
        ("qwen3_coder", "<tool_call>\n<function=f>\n<parameter=n>\n3\n</function>\n</tool_call>", "closing"),
        ("qwen3_coder", "<tool_call>\nf(3)\n</tool_call>", "<function=NAME>"),
        ("llama3_json", '{"name": "f", "parameters": {"n": 3}', "invalid JSON"),
        ("llama3_json", '{"name": "f", "parameters": {}}; {"name": "g", "parameters": {}}', "one tool call"),
        ("llama3_json", '{"name": "f", "parameters": {"n": NaN}}', "NaN"),
        ("mistral", '[TOOL_CALLS] [{"name": "f", "arguments": {"n": 3}}', "invalid JSON"),
        ("mistral", "[TOOL_CALLS] []", "non-empty"),
        ("mistral", "[TOOL_CALLS] f(3)", "expected NAME[ARGS]"),
        ("pythonic", "<|tool_call_start|>[f(n=float('nan'))]<|tool_call_end|>", "literals"),
        ("pythonic", "<|tool_call_start|>[f(n=1e999)]<|tool_call_end|>", "Infinity"),
        ("pythonic", "<|tool_call_start|>[f(s='\\ud800')]<|tool_call_end|>", "surrogate"),
        ("pythonic", "<|tool_call_start|>[f(n=" + "9" * 1200 + ")]<|tool_call_end|>", "digits"),
        ("pythonic", "<|tool_call_start|>[f(n=" + "9" * 5000 + ")]<|tool_call_end|>", "digits"),
        ("pythonic", "<|tool_call_start|>[f(n=" + "[" * 90 + "]" * 90 + ")]<|tool_call_end|>", "nested"),
        ("pythonic", "<|tool_call_start|>[f(n=" + "- " * 3000 + "1)]<|tool_call_end|>", "Python syntax"),
        ("pythonic", "<|tool_call_start|>[f(3)]<|tool_call_end|>", "named"),
        ("pythonic", "<|tool_call_start|>[os.system(c='x')]<|tool_call_end|>", "by name"),
        ("pythonic", "<|tool_call_start|>[f(n=3)]", "unclosed"),
        ("pythonic", "<|tool_call_start|>[f(n=3), f(n=4)", "unclosed"),
        ("pythonic", "<|tool_call_start|>[f(n=3, n=4)]<|tool_call_end|>", "twice"),
    ],
)
def test_malformed_or_unencodable_calls_are_errors(fmt, text, fragment):
    parsed = FORMATS[fmt].parse(text, schemas=SCHEMAS)
    assert parsed.tool_calls == () and fragment in parsed.error, parsed.error


def test_an_answer_is_not_a_call():
    assert FORMATS["llama3_json"].parse('{"result": 5}').tool_calls == ()
    assert FORMATS["llama3_json"].parse("The answer is 5.").content == "The answer is 5."
    assert FORMATS["mistral"].parse(" 36").content == "36"


def test_mistral_call_ids_are_nine_alphanumerics():
    parsed = FORMATS["mistral"].parse('[TOOL_CALLS] [{"name": "f", "arguments": {}}, {"name": "g", "arguments": {}}]')
    ids = [c.id for c in parsed.tool_calls]
    assert len(set(ids)) == 2 and all(len(i) == 9 and i.isalnum() for i in ids)


def test_json_values_refuse_what_cannot_be_encoded():
    with pytest.raises(JSONValueError):
        check_encodable({"a": float("nan")})
    with pytest.raises(JSONValueError):
        check_encodable(["\udc00"])
    deep: list = []
    for _ in range(MAX_DEPTH + 1):
        deep = [deep]
    with pytest.raises(JSONValueError, match="nested"):
        check_encodable(deep)
    assert loads(' {"a": [1, 2.5, "x", null, true]} ') == {"a": [1, 2.5, "x", None, True]}


soup = st.text(
    alphabet=st.sampled_from(list('<>/{}[]":,=\n tool_callfunctionparameterNaINST_CS\\ud8009')), max_size=120
)


pythonic_soup = st.text(alphabet=st.sampled_from(list("f(x=1e9, '\\\"[]{}-+.)ud80NaTrue_|<>")), max_size=120).map(
    lambda body: f"<|tool_call_start|>[{body}]<|tool_call_end|>"
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(FORMATS)), st.one_of(st.text(), soup, pythonic_soup))
def test_no_text_makes_a_parser_raise_or_pass_on_an_unencodable_value(fmt, text):
    parsed = FORMATS[fmt].parse(text, schemas=SCHEMAS)
    assert parsed.error is None or isinstance(parsed.error, str)
    for call in parsed.tool_calls:
        json.dumps(call.arguments, allow_nan=False).encode("utf-8")  # what the tool client will do with it
