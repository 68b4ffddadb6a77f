"""JSON a model wrote, read as data: a value that could not travel on as JSON is an error message, never an
exception.

Python's `json` reads more than JSON: `NaN` and `Infinity`, lone surrogates (`"\\ud800"`), integers of any
length up to the interpreter's 4,300-digit conversion limit (past it, a `ValueError`), and nesting as deep as the
recursion limit allows. Each of those decodes and then fails later (httpx will not encode NaN, UTF-8 will not
encode a lone surrogate, a deep value overflows the encoder's stack), where the failure would surface as an
infrastructure error instead of a mistake of the policy. So a model's JSON is checked here, once, where it is
parsed: what passes can be encoded, sent and validated downstream.

The tool-call parsers (`agentrl/rollout/chat/`) read with it, and the tool clients (`agentrl/toolserver/`) and the
evaluation's chat episodes check with it the arguments of calls they did not parse themselves; it imports nothing
of agentrl, so neither side depends on the other.
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects accepted in tool-call arguments."""
MAX_INT_DIGITS = 1000
"""Longest integer literal accepted (far below the interpreter's conversion limit)."""


class JSONValueError(ValueError):
    """The text is not JSON that can travel on; the message says why, for the policy to read."""


def _reject_constant(name: str) -> Any:
    raise JSONValueError(f"{name} is not a JSON number")


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise JSONValueError(f"an integer of {len(text.lstrip('-'))} digits (at most {MAX_INT_DIGITS})")
    return int(text)


_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_int=_bounded_int)


def decode_json(text: str, pos: int = 0) -> tuple[Any, int]:
    """The JSON value starting at `text[pos]` and the index after it; raises `JSONValueError` with a message fit
    for the policy when there is none, or when the value could not be encoded again."""
    try:
        value, end = _DECODER.raw_decode(text, pos)
    except JSONValueError:
        raise
    except json.JSONDecodeError as e:
        raise JSONValueError(f"invalid JSON ({e.msg} at character {e.pos - pos})") from None
    except RecursionError:
        raise JSONValueError(f"JSON nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as e:  # the interpreter's integer-conversion limit, among others
        raise JSONValueError(f"invalid JSON ({e})") from None
    check_encodable(value)
    return value, end


def loads(text: str) -> Any:
    """The whole of `text` as one JSON value (surrounding whitespace allowed); `JSONValueError` otherwise."""
    start = len(text) - len(text.lstrip())
    value, end = decode_json(text, start)
    if text[end:].strip():
        raise JSONValueError(f"unexpected text after the JSON value: {text[end:].strip()[:40]!r}")
    return value


def check_encodable(value: Any) -> None:
    """Raise `JSONValueError` unless `value` encodes as JSON: finite numbers, valid Unicode, at most `MAX_DEPTH`
    levels deep. Iterative, so no depth can overflow the stack."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            _check_text(item)
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, float):
            if item != item or item in (float("inf"), float("-inf")):
                raise JSONValueError("NaN and Infinity are not JSON numbers")
        elif isinstance(item, int):
            if len(str(abs(item))) > MAX_INT_DIGITS:
                raise JSONValueError(f"an integer of more than {MAX_INT_DIGITS} digits")
        elif isinstance(item, (list, tuple, dict)):
            if depth >= MAX_DEPTH:
                raise JSONValueError(f"JSON nested deeper than {MAX_DEPTH} levels")
            if isinstance(item, dict):
                for key, child in item.items():
                    if not isinstance(key, str):
                        raise JSONValueError("object keys must be strings")
                    _check_text(key)
                    stack.append((child, depth + 1))
            else:
                stack.extend((child, depth + 1) for child in item)
        else:
            raise JSONValueError(f"a {type(item).__name__} is not a JSON value")


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise JSONValueError("a string holds an invalid Unicode code point (a lone surrogate)") from None
