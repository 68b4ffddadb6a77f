"""The pythonic tool-call format of LFM2 / LFM2.5: `<|tool_call_start|>[f(x='a', n=1), g()]<|tool_call_end|>`.

The list between the markers is read with Python's own parser (`ast`), never evaluated: only calls of plain
names with keyword arguments whose values are literals are accepted. Values are what LFM2's templates write:
strings in single quotes with backslash escapes, numbers, `True`/`False`/`None` for scalars, and JSON (`true`,
`false`, `null` included) for objects and arrays. Whatever else the model writes (positional arguments, an
expression, `float('nan')`, `1e999`, a lone surrogate, nesting past `json_values.MAX_DEPTH`, an integer past
`json_values.MAX_INT_DIGITS`) is a parse error for the policy, never an exception.
"""

from __future__ import annotations

import ast
import json
from typing import Any

from agentrl.json_values import MAX_DEPTH, JSONValueError, check_encodable
from agentrl.rollout.chat.tool_call_format import ToolCallFormat
from agentrl.types import ToolCall

_NAMED = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}


class PythonicFormat(ToolCallFormat):
    name = "pythonic"
    open, close = "<|tool_call_start|>", "<|tool_call_end|>"
    call_stop = "<|tool_call_end|>"
    example = "<|tool_call_start|>[function_name(argument='value', other=1)]<|tool_call_end|>"

    def forced_prefix(self, name=None):
        return f"{self.open}[" if name is None else f"{self.open}[{name}("

    def write(self, name, arguments):
        listed = ", ".join(f"{key}={_literal(value)}" for key, value in arguments.items())
        return f"{self.open}[{name}({listed})]{self.close}"

    def parse_calls(self, text, id_prefix, types):
        start = text.find(self.open)
        if start < 0:
            stray = self.close in text
            return text.strip(), [], f"found {self.close} without {self.open}" if stray else None
        end = text.find(self.close, start)
        if end < 0:
            return text[:start].strip(), [], f"unclosed {self.open}: the call list needs a closing {self.close}"
        content = (text[:start] + text[end + len(self.close) :]).strip()
        if self.open in text[end:]:
            return content, [], f"write every call in one list: [f(...), g(...)] inside one {self.open}"
        try:
            calls = _calls(text[start + len(self.open) : end], id_prefix, self.call_id)
        except JSONValueError as e:
            return content, [], str(e)
        return content, calls, None


def _calls(body: str, id_prefix: str, call_id: Any) -> list[ToolCall]:
    try:
        tree = ast.parse(body.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        raise JSONValueError(f"the call list is not Python syntax ({type(e).__name__}: {e})") from None
    if not isinstance(tree, ast.List) or not tree.elts:
        raise JSONValueError("expected a list of calls: [function_name(argument=value, ...)]")
    calls = []
    for node in tree.elts:
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            raise JSONValueError("each item of the list must be a call of a tool by name: name(argument=value)")
        name = node.func.id
        if node.args or any(k.arg is None for k in node.keywords):
            raise JSONValueError(f"arguments of {name} must be named: {name}(argument=value)")
        arguments = {k.arg: _value(k.value, 1) for k in node.keywords}
        if len(arguments) < len(node.keywords):
            raise JSONValueError(f"an argument of {name} is given twice")
        check_encodable(arguments)
        calls.append(ToolCall(id=call_id(id_prefix, len(calls)), name=name, arguments=arguments))
    return calls


def _value(node: ast.expr, depth: int) -> Any:
    """A literal's value; JSONValueError for anything that is not one (nothing is evaluated)."""
    if depth > MAX_DEPTH:
        raise JSONValueError(f"arguments nested deeper than {MAX_DEPTH} levels")
    if isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, (str, bool, int, float))):
        return node.value
    if isinstance(node, ast.Name) and node.id in _NAMED:
        return _NAMED[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _value(node.operand, depth + 1)
        if isinstance(inner, bool) or not isinstance(inner, (int, float)):
            raise JSONValueError("a sign belongs before a number")
        return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_value(item, depth + 1) for item in node.elts]
    if isinstance(node, ast.Dict):
        keys = [_value(key, depth + 1) if key is not None else None for key in node.keys]
        if not all(isinstance(key, str) for key in keys):
            raise JSONValueError("object keys must be strings")
        return {key: _value(value, depth + 1) for key, value in zip(keys, node.values, strict=True)}
    what = f"a call of {node.func.id}" if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) else None
    raise JSONValueError(f"argument values must be literals, not {what or 'an expression'}")


def _literal(value: Any) -> str:
    """`value` as LFM2's templates write an argument (what `_value` reads back)."""
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n").replace("\r", "\\r")
        return f"'{escaped}'"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)
