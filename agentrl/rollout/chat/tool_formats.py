"""Tool-call formats of model families: what a turn that calls tools looks like, read back into `ToolCall`s.

    hermes       Qwen2.5, Qwen3     <tool_call>{"name": "f", "arguments": {...}}</tool_call>
    qwen3_coder  Qwen3-Coder/3.5    <tool_call><function=f><parameter=x>1</parameter></function></tool_call>
    llama3_json  Llama 3.1 / 3.2    {"name": "f", "parameters": {...}}   (one call per turn)
    mistral      Mistral, Mixtral   [TOOL_CALLS][{"name": "f", "arguments": {...}}]  or  [TOOL_CALLS]f[ARGS]{...}
    pythonic     LFM2, LFM2.5       <|tool_call_start|>[f(x='a', n=1)]<|tool_call_end|>   (pythonic_format.py)

(newlines inside the markup left out).

`detect(template)` reads the format off a chat template. Parsing never raises: malformed markup comes back as
`ParsedTurn.error`, which the rollout reports to the policy as a mistake (and scores), never as an
infrastructure failure. The parsers are small and strict by design rather than the regular expressions of
transformers' response schemas, which fall back to plain text on a malformed call (turning a broken call into an
answer) and end a call at the first closing tag even inside a JSON string. Argument JSON goes through
`agentrl/json_values.py`, so nothing that parses here can fail to encode later.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from agentrl.json_values import JSONValueError, decode_json, loads
from agentrl.rollout.chat.pythonic_format import PythonicFormat
from agentrl.rollout.chat.tool_call_format import ToolCallFormat
from agentrl.types import ToolCall


def _call(name: Any, arguments: Any, call_id: str) -> ToolCall:
    """A call from decoded JSON fields; `JSONValueError` says what is wrong with them."""
    if not isinstance(name, str) or not name:
        raise JSONValueError('missing "name" (a string)')
    if isinstance(arguments, str):
        try:
            arguments = loads(arguments) if arguments.strip() else {}
        except JSONValueError:
            raise JSONValueError(f'"arguments" of {name} is a string that is not JSON') from None
    if not isinstance(arguments, dict):
        raise JSONValueError(f'"arguments" of {name} must be a JSON object')
    return ToolCall(id=call_id, name=name, arguments=arguments)


class HermesFormat(ToolCallFormat):
    """`<tool_call>` blocks of one JSON object each. A block is read as one JSON value followed by
    `</tool_call>`, so markup quoted inside a JSON string (code that prints a call) does not end it early."""

    name = "hermes"
    open, close = "<tool_call>", "</tool_call>"
    call_stop = "</tool_call>"
    example = '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'

    closing = "}\n</tool_call>"

    def forced_prefix(self, name=None):
        return "<tool_call>\n" if name is None else '<tool_call>\n{"name": ' + json.dumps(name) + ', "arguments": '

    def parse_calls(self, text, id_prefix, types):
        start = text.find(self.open)
        content = (text if start < 0 else text[:start]).strip()
        stray = f"found {self.close} without an opening {self.open}"
        if self.close in (text if start < 0 else text[:start]):
            return content, [], stray
        calls: list[ToolCall] = []
        while start >= 0:
            body_end = text.find(self.close, start)
            if body_end < 0:
                return content, [], self.unclosed
            try:
                call, end = self.block(text, start + len(self.open), self.call_id(id_prefix, len(calls)), types)
            except JSONValueError as e:
                return content, [], str(e) if str(e) == self.unclosed else f"tool call {len(calls) + 1}: {e}"
            calls.append(call)
            start = text.find(self.open, end)
            if self.close in text[end : len(text) if start < 0 else start]:
                return content, [], stray
        return content, calls, None

    @property
    def unclosed(self) -> str:
        return f"unclosed {self.open}: every {self.open} needs a matching {self.close}"

    def block(self, text: str, pos: int, call_id: str, types: dict) -> tuple[ToolCall, int]:
        """The call whose body starts at `pos`, and the index after its closing tag."""
        body = len(text) - len(text[pos:].lstrip())
        data, json_end = decode_json(text, body)
        after = len(text) - len(text[json_end:].lstrip())
        if not text.startswith(self.close, after):
            if text.find(self.close, after) < 0:
                raise JSONValueError(self.unclosed)
            raise JSONValueError(f"unexpected text after the JSON object: {text[after : after + 40]!r}")
        if not isinstance(data, dict):
            raise JSONValueError('expected a JSON object {"name": ..., "arguments": {...}}')
        return _call(data.get("name"), data.get("arguments", {}), call_id), after + len(self.close)


_FUNCTION = re.compile(r"\s*<function=([^>\n]*)>")
_PARAMETER = re.compile(r"\s*<parameter=([^>\n]*)>\n?")


class Qwen3CoderFormat(HermesFormat):
    """`<tool_call>` blocks holding `<function=NAME>` with one `<parameter=KEY>` element per argument. Values are
    text; a value is typed by the tool's JSON schema (integer, number, boolean, object, array), as the template
    wrote it, and stays a string where the schema says string or says nothing."""

    name = "qwen3_coder"
    example = "<tool_call>\n<function=NAME>\n<parameter=ARGUMENT>\nVALUE\n</parameter>\n</function>\n</tool_call>"

    def forced_prefix(self, name=None):
        return "<tool_call>\n<function=" if name is None else f"<tool_call>\n<function={name}>\n"

    def write(self, name, arguments):
        params = "".join(
            f"<parameter={key}>\n{value if isinstance(value, str) else json.dumps(value)}\n</parameter>\n"
            for key, value in arguments.items()
        )
        return f"{self.forced_prefix(name)}{params}</function>\n</tool_call>"

    def block(self, text, pos, call_id, types):
        end = text.find(self.close, pos)
        inner = text[pos:end]
        match = _FUNCTION.match(inner)
        if match is None or not match.group(1).strip():
            raise JSONValueError("expected <function=NAME> inside <tool_call>")
        name = match.group(1).strip()
        rest = inner[match.end() :]
        closing = rest.rfind("</function>")
        if closing < 0 or rest[closing + len("</function>") :].strip():
            raise JSONValueError(f"<function={name}> needs a closing </function> before </tool_call>")
        arguments = self.parameters(name, rest[:closing], types.get(name, {}))
        return ToolCall(id=call_id, name=name, arguments=arguments), end + len(self.close)

    @staticmethod
    def parameters(name: str, body: str, types: dict[str, str]) -> dict[str, Any]:
        arguments: dict[str, Any] = {}
        while body.strip():
            match = _PARAMETER.match(body)
            if match is None:
                raise JSONValueError(f"unexpected text in <function={name}>: {body.strip()[:40]!r}")
            key = match.group(1).strip()
            value_end = body.find("</parameter>", match.end())
            if not key or value_end < 0:
                raise JSONValueError(f"every <parameter=...> of {name} needs a name and a closing </parameter>")
            value = body[match.end() : value_end]
            value = value[:-1] if value.endswith("\n") else value
            if key in arguments:
                raise JSONValueError(f"parameter {key!r} of {name} is given twice")
            arguments[key] = _typed(value, types.get(key))
            body = body[value_end + len("</parameter>") :]
        return arguments


def _typed(value: str, kind: str | None) -> Any:
    """A parameter's text as the type its schema names; the text itself when it does not parse as that type (the
    tool's argument validation then reports it)."""
    if kind in (None, "string"):
        return value
    try:
        typed = loads(value)
    except JSONValueError:
        return value
    matches = {
        "integer": isinstance(typed, int) and not isinstance(typed, bool),
        "number": isinstance(typed, (int, float)) and not isinstance(typed, bool),
        "boolean": isinstance(typed, bool),
        "object": isinstance(typed, dict),
        "array": isinstance(typed, list),
        "null": typed is None,
    }
    return typed if matches.get(kind, True) else value


class Llama3JsonFormat(ToolCallFormat):
    """One JSON object `{"name": ..., "parameters": {...}}` as the whole turn (optionally after `<|python_tag|>`),
    as Llama 3.1/3.2 write custom tool calls; their template renders one call per assistant turn. A turn that
    is not such an object is an answer."""

    name = "llama3_json"
    max_calls_per_turn = 1
    example = '{"name": <function-name>, "parameters": <args-json-object>}'

    closing = "}"

    def forced_prefix(self, name=None):
        return '{"name": ' + (json.dumps(name) + ', "parameters": ' if name is not None else "")

    def parse_calls(self, text, id_prefix, types):
        body = text.strip().removeprefix("<|python_tag|>").lstrip()
        if not body.startswith("{"):
            return text.strip(), [], None
        try:
            data, end = decode_json(body)
        except JSONValueError as e:
            if '"name"' in body:
                return "", [], str(e)
            return text.strip(), [], None  # brace-led prose, not a call
        if not isinstance(data, dict) or "name" not in data:
            return text.strip(), [], None
        rest = body[end:].strip()
        if rest:
            more = rest.lstrip(";").lstrip().startswith("{")
            return "", [], "one tool call per turn" if more else f"unexpected text after the call: {rest[:40]!r}"
        arguments = data.get("parameters", data.get("arguments", {}))
        return "", [_call(data["name"], arguments, self.call_id(id_prefix, 0))], None


_MISTRAL_NAME = re.compile(r"\s*([A-Za-z0-9_.-]+)\[ARGS\]")


class MistralFormat(ToolCallFormat):
    """`[TOOL_CALLS]` then a JSON list of `{"name", "arguments"}` objects (tokenizer v3), or `NAME[ARGS]{...}`
    once per call (later tokenizers). Call ids are nine alphanumeric characters, as Mistral's templates require."""

    name = "mistral"
    marker = "[TOOL_CALLS]"
    example = '[TOOL_CALLS][{"name": <function-name>, "arguments": <args-json-object>}]'

    closing = "}]"

    def forced_prefix(self, name=None):
        return '[TOOL_CALLS] [{"name": ' + (json.dumps(name) + ', "arguments": ' if name is not None else "")

    def parse_calls(self, text, id_prefix, types):
        start = text.find(self.marker)
        if start < 0:
            return text.strip(), [], None
        content, calls, rest = text[:start].strip(), [], text[start + len(self.marker) :]
        if rest.lstrip().startswith("["):
            listed = loads(rest)
            if not isinstance(listed, list) or not listed:
                return content, [], "expected a non-empty JSON list of calls after [TOOL_CALLS]"
            for item in listed:
                if not isinstance(item, dict):
                    return content, [], 'each call must be a JSON object {"name": ..., "arguments": {...}}'
                calls.append(_call(item.get("name"), item.get("arguments", {}), self.call_id(id_prefix, len(calls))))
            return content, calls, None
        while rest.strip():
            rest = rest.strip().removeprefix(self.marker)
            match = _MISTRAL_NAME.match(rest)
            if match is None:
                return content, [], "expected NAME[ARGS]{...} or a JSON list after [TOOL_CALLS]"
            arguments, end = decode_json(rest, len(rest) - len(rest[match.end() :].lstrip()))
            calls.append(_call(match.group(1), arguments, self.call_id(id_prefix, len(calls))))
            rest = rest[end:]
        return content, calls, None if calls else "no call after [TOOL_CALLS]"

    def call_id(self, id_prefix: str, index: int) -> str:
        digest = hashlib.sha256(f"{id_prefix}_{index}".encode()).hexdigest()
        return "".join(c for c in digest if c.isalnum())[:9]


FORMATS: dict[str, ToolCallFormat] = {
    f.name: f for f in (HermesFormat(), Qwen3CoderFormat(), Llama3JsonFormat(), MistralFormat(), PythonicFormat())
}


def detect(template: str | None) -> ToolCallFormat | None:
    """The format a chat template renders tool calls in, or None when it shows no tool calls at all."""
    if not template:
        return None
    if "<|tool_call_start|>" in template:
        return FORMATS["pythonic"]
    if "<function=" in template and "<tool_call>" in template:
        return FORMATS["qwen3_coder"]
    if "<tool_call>" in template and "<arg_key>" not in template:  # GLM-4.5 wraps key/value tags in <tool_call>
        return FORMATS["hermes"]
    if "[TOOL_CALLS]" in template:
        return FORMATS["mistral"]
    if "<|start_header_id|>" in template and '"parameters"' in template:
        return FORMATS["llama3_json"]
    return None
