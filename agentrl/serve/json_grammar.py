"""`JsonGrammar`: JSON values that fit a JSON schema, read one character at a time (a pushdown automaton).

What constrained decoding needs of a forced call's arguments: from a state, which next characters keep the text a
prefix of some value that fits the schema. States are immutable tuples (hashable, so what is allowed after a
state can be cached), a stack of frames with the innermost last:

    ("V", node, ws)                    a value of `node` is expected (after `ws` whitespace characters)
    ("S", choices, text, escape)       inside a string: `choices` the values allowed (an enum, an object's keys
                                       left) with `text` written so far, or None and None for any string
    ("N", integer, dfa)                inside a number (`dfa`: the state of the number's syntax)
    ("L", rest)                        inside true / false / null, `rest` still to write
    ("O", node, phase, seen, key, ws)  inside an object: phase open / key / colon / value / after / next
    ("A", node, phase, ws)             inside an array: phase open / value / after

The schema subset: `type` (one or a list), `properties`, `required`, `additionalProperties` (a schema, or true for
any value under any key when no `properties` are given), `items`, `enum` and `const` of strings, `anyOf` /
`oneOf` (the first alternative whose kind the value's first character starts: a string, a number, an object...),
`$ref` into `$defs`. Objects with `properties` take only those keys, each at most once, and close only once every
required key is in. Anything else (`pattern`, `minimum`, lengths) is not enforced. Whitespace between tokens is
limited to `MAX_WS` characters in a row, so a model cannot loop on spaces.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

State = tuple[tuple[Any, ...], ...]
MAX_WS = 8
WS = " \n\t"
_ESCAPES = '"\\/bfnrtu'
_HEX = "0123456789abcdefABCDEF"
# number syntax: 0 start, 1 after '-', 2 a lone 0, 3 digits, 4 after '.', 5 fraction, 6 after e, 7 sign, 8 exponent
_NUMBER_END = frozenset({2, 3, 5, 8})


@dataclass(frozen=True)
class Node:
    """One schema, normalised: `kinds` of value it takes, and what constrains each."""

    kinds: frozenset[str]
    """Among string, number, integer, boolean, null, object, array; all of them for any value."""
    choices: frozenset[str] | None = None
    """The strings an enum (or const) allows."""
    properties: tuple[tuple[str, int], ...] = ()
    required: frozenset[str] = frozenset()
    closed: bool = False
    """Whether the object takes only the keys of `properties` (a schema that lists them, even none)."""
    extra: int | None = None
    """The node of values under keys not in `properties` (objects without properties)."""
    items: int | None = None
    alternatives: tuple[int, ...] = ()


ANY_KINDS = frozenset({"string", "number", "integer", "boolean", "null", "object", "array"})


class JsonGrammar:
    """Values of one JSON schema; `start()`, then `feed(state, char)` until `complete(state)`."""

    def __init__(self, schema: Mapping[str, Any]):
        self.nodes: list[Node] = []
        self._defs = dict(schema.get("$defs") or schema.get("definitions") or {})
        self._any = self._add(Node(ANY_KINDS))
        self.root = self._node(schema, depth=0)

    def start(self) -> State:
        return (("V", self.root, 0),)

    @staticmethod
    def complete(state: State) -> bool:
        """Whether the text so far is a whole value (a number is whole once what follows it is not a digit)."""
        if not state:
            return True
        top = state[-1]
        return len(state) == 1 and top[0] == "N" and top[2] in _NUMBER_END

    def feed(self, state: State, char: str) -> State | None:
        """The state after `char`, or None when no fitting value goes on with it."""
        if not state:
            return None
        top, below = state[-1], state[:-1]
        kind = top[0]
        if kind == "V":
            if char in WS:
                return below + (("V", top[1], top[2] + 1),) if top[2] < MAX_WS else None
            return self._begin(below, top[1], char)
        if kind == "S":
            return self._string(below, top, char)
        if kind == "N":
            after = _number_step(top[2], char, integer=top[1])
            if after is not None:
                return below + (("N", top[1], after),)
            if top[2] not in _NUMBER_END:
                return None
            finished = self._finish(below, None)
            return None if finished is None or not finished else self.feed(finished, char)
        if kind == "L":
            if char != top[1][0]:
                return None
            return self._finish(below, None) if len(top[1]) == 1 else below + (("L", top[1][1:]),)
        if kind == "O":
            return self._object(below, top, char)
        return self._array(below, top, char)

    # --- values ---------------------------------------------------------------------------------------------

    def _begin(self, below: State, index: int, char: str) -> State | None:
        node = self._pick(index, char)
        if node is None:
            return None
        index, chosen = node
        if char == '"':
            text = "" if chosen.choices is not None else None
            return below + (("S", chosen.choices, text, 0),)
        if char == "{":
            return below + (("O", index, "open", frozenset(), None, 0),)
        if char == "[":
            return below + (("A", index, "open", 0),)
        if char in "-0123456789":
            integer = "number" not in chosen.kinds
            return below + (("N", integer, _number_step(0, char, integer=integer)),)
        literal = {"t": "true", "f": "false", "n": "null"}[char]
        return below + (("L", literal[1:]),)

    def _pick(self, index: int, char: str) -> tuple[int, Node] | None:
        """The node (an alternative of a union) whose kind a value starting with `char` has."""
        kind = _kind_of(char)
        if kind is None:
            return None
        node = self.nodes[index]
        for alternative in node.alternatives or (index,):
            chosen = self.nodes[alternative]
            if kind == "number" and chosen.kinds & {"number", "integer"}:
                return alternative, chosen
            if kind in ("true", "false") and "boolean" in chosen.kinds:
                return alternative, chosen
            if kind in chosen.kinds:
                return alternative, chosen
        return None

    def _string(self, below: State, top: tuple[Any, ...], char: str) -> State | None:
        _, choices, text, escape = top
        if escape == 1:
            if char not in _ESCAPES:
                return None
            return below + (("S", choices, text, 2 if char == "u" else 0),)
        if escape:
            if char not in _HEX:
                return None
            return below + (("S", choices, text, 0 if escape == 5 else escape + 1),)
        if char == '"':
            if choices is not None and text not in choices:
                return None
            return self._finish(below, text)
        if ord(char) < 0x20:
            return None
        if choices is None:
            return below + (("S", None, None, 1 if char == "\\" else 0),)
        written = text + char
        if char == "\\" or not any(c.startswith(written) for c in choices):
            return None
        return below + (("S", choices, written, 0),)

    # --- containers -----------------------------------------------------------------------------------------

    def _object(self, below: State, top: tuple[Any, ...], char: str) -> State | None:
        _, index, phase, seen, key, ws = top
        node = self.nodes[index]
        if char in WS and phase in ("open", "colon", "after", "next"):
            return below + (("O", index, phase, seen, key, ws + 1),) if ws < MAX_WS else None
        if phase in ("open", "next") and char == '"':
            left = self._keys_left(node, seen)
            if left is not None and not left:
                return None
            return below + (("O", index, "key", seen, None, 0), ("S", left, "" if left is not None else None, 0))
        if phase == "colon" and char == ":":
            child = dict(node.properties).get(key, node.extra if node.extra is not None else self._any)
            return below + (("O", index, "value", seen, key, 0), ("V", child, 0))
        if phase == "after" and char == ",":
            left = self._keys_left(node, seen)
            return below + (("O", index, "next", seen, None, 0),) if left is None or left else None
        if phase in ("open", "after") and char == "}" and node.required <= seen:
            return self._finish(below, None)
        return None

    def _keys_left(self, node: Node, seen: frozenset[str]) -> frozenset[str] | None:
        if not node.closed:
            return None
        return frozenset(name for name, _ in node.properties) - seen

    def _array(self, below: State, top: tuple[Any, ...], char: str) -> State | None:
        _, index, phase, ws = top
        node = self.nodes[index]
        items = node.items if node.items is not None else self._any
        if char in WS and phase in ("open", "after"):
            return below + (("A", index, phase, ws + 1),) if ws < MAX_WS else None
        if char == "]" and phase in ("open", "after"):
            return self._finish(below, None)
        if phase == "after":
            return below + (("A", index, "value", 0), ("V", items, 0)) if char == "," else None
        return self.feed(below + (("A", index, "value", 0), ("V", items, 0)), char)

    def _finish(self, below: State, value: str | None) -> State | None:
        """The state once the innermost value is whole: its container moves on (an object's key is recorded)."""
        if not below:
            return ()
        top, rest = below[-1], below[:-1]
        if top[0] == "O" and top[2] == "key":
            return rest + (("O", top[1], "colon", top[3], value, 0),)
        if top[0] == "O":
            return rest + (("O", top[1], "after", top[3] | {top[4]}, None, 0),)
        return rest + (("A", top[1], "after", 0),)

    # --- schemas into nodes ---------------------------------------------------------------------------------

    def _add(self, node: Node) -> int:
        self.nodes.append(node)
        return len(self.nodes) - 1

    def _node(self, schema: Any, depth: int) -> int:
        if not isinstance(schema, Mapping) or depth > 32:
            return self._any
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.rsplit("/", 1)[-1] in self._defs:
            return self._node(self._defs[ref.rsplit("/", 1)[-1]], depth + 1)
        union = schema.get("anyOf") or schema.get("oneOf")
        if isinstance(union, list) and union:
            alternatives = tuple(self._node(s, depth + 1) for s in union)
            kinds = frozenset().union(*(self.nodes[a].kinds for a in alternatives))
            return self._add(Node(kinds, alternatives=alternatives))
        values = schema.get("enum", [schema["const"]] if "const" in schema else None)
        if isinstance(values, list) and values and all(isinstance(v, str) for v in values):
            return self._add(Node(frozenset({"string"}), choices=frozenset(values)))
        declared = schema.get("type")
        kinds = frozenset(declared if isinstance(declared, list) else [declared]) & ANY_KINDS if declared else None
        if not kinds:
            kinds = frozenset({"object"}) if "properties" in schema else ANY_KINDS
        properties = schema.get("properties") if isinstance(schema.get("properties"), Mapping) else {}
        index = self._add(Node(kinds))  # placed first, so a recursive schema's children may point back at it
        extra = schema.get("additionalProperties")
        self.nodes[index] = Node(
            kinds,
            properties=tuple((str(k), self._node(v, depth + 1)) for k, v in properties.items()),
            required=frozenset(str(k) for k in schema.get("required") or () if k in properties),
            closed="properties" in schema or extra is False,
            extra=self._node(extra, depth + 1) if isinstance(extra, Mapping) and not properties else None,
            items=self._node(schema.get("items"), depth + 1) if "array" in kinds else None,
        )
        return index


def _kind_of(char: str) -> str | None:
    if char == '"':
        return "string"
    if char == "{":
        return "object"
    if char == "[":
        return "array"
    if char in "-0123456789":
        return "number"
    return {"t": "true", "f": "false", "n": "null"}.get(char)


def _number_step(state: int, char: str, *, integer: bool) -> int | None:
    """The number syntax's next state after `char` (None: not part of the number)."""
    digit = char.isdigit() and char.isascii()
    if state == 0:
        return 1 if char == "-" else 2 if char == "0" else 3 if digit else None
    if state == 1:
        return 2 if char == "0" else 3 if digit else None
    if state in (2, 3):
        if digit:
            return 3 if state == 3 else None
        if integer:
            return None
        return 4 if char == "." else 6 if char in "eE" else None
    if state in (4, 5):
        if digit:
            return 5
        return 6 if state == 5 and char in "eE" else None
    if state in (6, 7):
        return 8 if digit else 7 if state == 6 and char in "+-" else None
    if state == 8:
        return 8 if digit else None
    return None
