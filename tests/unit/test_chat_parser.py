"""Tool-call parsing: well-formed calls parse exactly; anything else comes back as an error, never raises."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentrl.rollout.chat import ChatFormat, parse_tool_calls

pytestmark = pytest.mark.unit

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


def block(name, arguments):
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


def test_single_call_and_content():
    parsed = parse_tool_calls("Let me compute.\n" + block("calculate", {"expression": "2*3"}))
    assert parsed.error is None
    assert parsed.content == "Let me compute."
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [("calculate", {"expression": "2*3"})]


def test_parallel_calls_get_distinct_ids():
    parsed = parse_tool_calls(block("a", {}) + "\n" + block("b", {"x": 1}), id_prefix="call_3")
    assert [c.id for c in parsed.tool_calls] == ["call_3_0", "call_3_1"]


def test_plain_answer_has_no_calls():
    parsed = parse_tool_calls("  178377 ")
    assert parsed.tool_calls == () and parsed.error is None and parsed.content == "178377"


def test_arguments_as_json_string_are_accepted():
    parsed = parse_tool_calls('<tool_call>{"name": "f", "arguments": "{\\"x\\": 2}"}</tool_call>')
    assert parsed.tool_calls[0].arguments == {"x": 2}


@pytest.mark.parametrize(
    "text, fragment",
    [
        ('<tool_call>{"name": "f", "arguments": {}}', "unclosed"),
        ('{"name": "f"}</tool_call>', "without an opening"),
        ("<tool_call>not json</tool_call>", "invalid JSON"),
        ('<tool_call>["f"]</tool_call>', "JSON object"),
        ('<tool_call>{"arguments": {}}</tool_call>', 'missing "name"'),
        ('<tool_call>{"name": "f", "arguments": [1]}</tool_call>', "must be a JSON object"),
        ('<tool_call>{"name": "f", "arguments": "nope"}</tool_call>', "not JSON"),
    ],
)
def test_malformed_markup_is_reported(text, fragment):
    parsed = parse_tool_calls(text)
    assert parsed.tool_calls == ()
    assert fragment in parsed.error


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_never_raises_on_arbitrary_text(text):
    parsed = parse_tool_calls(text)
    assert parsed.error is None or isinstance(parsed.error, str)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.text(min_size=1), st.dictionaries(st.text(), json_values, max_size=4)), max_size=4),
    st.text().filter(lambda s: "<tool_call>" not in s and "</tool_call>" not in s),
)
def test_well_formed_calls_round_trip(calls, prefix):
    text = prefix + "".join(block(name, args) for name, args in calls)
    parsed = parse_tool_calls(text)
    assert parsed.error is None
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == calls


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list('<>/{}":,tool_call namergs[]\n')), max_size=80))
def test_never_raises_on_markup_soup(tiny_tokenizer, text):
    parsed = parse_tool_calls(text)
    message = ChatFormat(tiny_tokenizer).assistant_message(parsed, text)
    assert message["role"] == "assistant"


def test_markup_inside_json_strings_does_not_end_the_block():
    code = 'print("<tool_call>{}</tool_call>")'
    parsed = parse_tool_calls(block("run", {"code": code}) + block("<tool_call>", {}))
    assert parsed.error is None
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [("run", {"code": code}), ("<tool_call>", {})]
