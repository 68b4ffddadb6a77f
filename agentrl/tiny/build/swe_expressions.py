"""Random small Python expressions for the SWE drills, and the vocabulary they are drawn from.

`Gen` draws typed expression trees (names, attributes, calls, indexing, slicing, arithmetic, comparisons, string
literals) and `render` writes one as Python source; `swe_mutations.mutate` changes one in one spot as a one-line
fix would, and `agentrl/tiny/build/swe_drills.py` states its issues with them.
"""

from __future__ import annotations

import random
from typing import Any

from agentrl.scaffolds.demonstration import made_up_name

# --- vocabulary -----------------------------------------------------------------------------------------------

_NUM_VARS = (
    "count size total price width height seconds minutes index amount rate score level offset n x y i k delta "
    "days hours cents balance quantity weight low high limit start end step depth radius"
).split()
_NUM_ATTRS = "width height balance rate count capacity limit size total radius start end step speed level".split()
_STR_VARS = "name text line word path prefix suffix key label title value sep".split()
_SEQ_VARS = "items values parts words rows lines tokens fields scores numbers entries names".split()
_SEQ_ATTRS = "items values entries rows names _queue _data history".split()
_DICT_VARS = "data counts record config totals prices self.items self.counts self._cache".split()
SEPARATORS = (".", ",", " ", "-", "_", ":", "/", "=", "#", ";", "|", "\\n", ", ", "://")
KEYS = ("name", "id", "total", "count", "default", "en", "type", "size")
INTS = (0, 1, 2, 3, 4, 5, 7, 10, 12, 24, 60, 100, 365, 1000, 1024, 9, 32, -1)


# --- expressions ----------------------------------------------------------------------------------------------
# A node is a tuple: ("name", s) ("num", n) ("str", s) ("attr", base, a) ("call", func, args) ("kw", k, node)
# ("index", base, node) ("slice", base, lo, hi) ("bin", op, l, r) ("cmp", op, l, r) ("bool", op, l, r)
# ("not", node) ("neg", node). Rendering adds the parentheses precedence needs.

Node = tuple[Any, ...]
_PRECEDENCE = {"bool_or": 1, "bool_and": 2, "not": 3, "cmp": 4, "+": 6, "-": 6, "*": 7, "/": 7, "//": 7, "%": 7}


def _prec(node: Node) -> int:
    kind = node[0]
    if kind == "bool":
        return _PRECEDENCE[f"bool_{node[1]}"]
    if kind == "bin":
        return _PRECEDENCE[node[1]]
    if kind in ("cmp", "not"):
        return _PRECEDENCE[kind]
    if kind == "neg" or (kind == "num" and node[1] < 0):
        return 8
    return 10


def render(node: Node, quote: str = '"') -> str:
    """Python source of an expression node; string literals in `quote`."""
    kind = node[0]

    def sub(child: Node, at_least: int) -> str:
        text = render(child, quote)
        return f"({text})" if _prec(child) < at_least else text

    if kind == "name":
        return node[1]
    if kind == "num":
        return str(node[1])
    if kind == "str":
        return f"{quote}{node[1]}{quote}"
    if kind == "attr":
        return f"{sub(node[1], 10)}.{node[2]}"
    if kind == "call":
        return f"{sub(node[1], 10)}({', '.join(render(a, quote) for a in node[2])})"
    if kind == "kw":
        return f"{node[1]}={render(node[2], quote)}"
    if kind == "index":
        return f"{sub(node[1], 10)}[{render(node[2], quote)}]"
    if kind == "slice":
        lo = render(node[2], quote) if node[2] is not None else ""
        hi = render(node[3], quote) if node[3] is not None else ""
        return f"{sub(node[1], 10)}[{lo}:{hi}]"
    if kind in ("bin", "cmp", "bool"):
        p = _prec(node)
        return f"{sub(node[2], p)} {node[1]} {sub(node[3], p + 1)}"
    if kind == "not":
        return f"not {sub(node[1], 3)}"
    if kind == "neg":
        return f"-{sub(node[1], 8)}"
    raise ValueError(f"unknown node {node!r}")


def _name(text: str) -> Node:
    if text.startswith("self."):
        return ("attr", ("name", "self"), text[5:])
    return ("name", text)


def method_call(base: Node, method: str, *args: Node) -> Node:
    return ("call", ("attr", base, method), list(args))


def function_call(name: str, *args: Node) -> Node:
    return ("call", ("name", name), list(args))


class Gen:
    """Random typed expressions; `self_attrs` makes `self.x` operands likely (a method's body). With probability
    `made_up` a variable, attribute or constant is made up (`made_up_name`, a number below 1000) instead of
    drawn from the short lists above, so that a policy learns to copy operands rather than recall them."""

    def __init__(self, rng: random.Random, self_attrs: bool, made_up: float = 0.0):
        self.rng, self.self_attrs, self.made_up = rng, self_attrs, made_up

    def _made_up(self) -> bool:
        # no draw at all when nothing is made up: the drill stream stays what it was without the option
        return bool(self.made_up) and self.rng.random() < self.made_up

    def _word(self, words: list[str]) -> str:
        return made_up_name(self.rng, max_chars=8) if self._made_up() else self.rng.choice(words)

    def num_var(self) -> Node:
        if self.self_attrs and self.rng.random() < 0.5:
            return ("attr", ("name", "self"), self._word(_NUM_ATTRS))
        return ("name", self._word(_NUM_VARS))

    def seq_var(self) -> Node:
        if self.self_attrs and self.rng.random() < 0.5:
            return ("attr", ("name", "self"), self._word(_SEQ_ATTRS))
        return ("name", self._word(_SEQ_VARS))

    def const(self) -> Node:
        if self._made_up():
            return ("num", self.rng.randint(2, 999))
        return ("num", self.rng.choice(INTS[:-1]))

    def lit(self) -> Node:
        return ("str", self.rng.choice(SEPARATORS))

    def operand(self, depth: int) -> Node:
        """A number that is not a constant (constants only ever stand on the right of an operator)."""
        return self.num(depth, const_ok=False)

    def num(self, depth: int, const_ok: bool = True) -> Node:
        rng = self.rng
        r = rng.random()
        if depth <= 0 or r < 0.3:
            return self.const() if const_ok and rng.random() < 0.25 else self.num_var()
        if r < 0.6:
            op = rng.choice(["+", "-", "*", "/", "//", "%", "+", "-", "*"])
            right = self.const() if rng.random() < 0.45 else self.operand(depth - 1)
            return ("bin", op, self.operand(depth - 1), right)
        if r < 0.7:
            return function_call("len", self.seq(depth - 1))
        if r < 0.76:
            return function_call(rng.choice(["sum", "max", "min"]), self.seq(depth - 1))
        if r < 0.82:
            return function_call(rng.choice(["max", "min"]), self.operand(depth - 1), self.num(depth - 1))
        if r < 0.86:
            return function_call(rng.choice(["abs", "int", "round"]), self.operand(depth - 1))
        if r < 0.9:
            return function_call("round", self.operand(depth - 1), ("num", rng.choice([1, 2, 3])))
        if r < 0.95:
            return method_call(_name(rng.choice(_DICT_VARS)), "get", self.key(), ("num", rng.choice([0, 1])))
        return method_call(self.text(depth - 1), rng.choice(["count", "find", "index"]), self.lit())

    def key(self) -> Node:
        if self.rng.random() < 0.7:
            return ("name", self.rng.choice(["name", "key", "sku", "word", "item"]))
        return ("str", self.rng.choice(KEYS))

    def text(self, depth: int) -> Node:
        rng = self.rng
        r = rng.random()
        if depth <= 0 or r < 0.3:
            return ("name", self._word(_STR_VARS)) if rng.random() < 0.8 else self.lit()
        if r < 0.5:
            return method_call(self.text(depth - 1), rng.choice(["lower", "upper", "strip", "title", "capitalize"]))
        if r < 0.6:
            return method_call(self.text(depth - 1), "replace", self.lit(), self.lit())
        if r < 0.7:
            return method_call(self.joiner(), "join", self.seq(depth - 1))
        if r < 0.8:
            return ("index", self.sliceable(depth - 1), self.index())
        if r < 0.9:
            return ("slice", self.text(depth - 1), *self.bounds())
        return function_call("str", self.operand(depth - 1))

    def joiner(self) -> Node:
        return ("str", self.rng.choice(["", *SEPARATORS]))

    def index(self) -> Node:
        r = self.rng.random()
        if r < 0.5:
            return ("num", self.rng.choice([0, 1, 2, -1]))
        if r < 0.75:
            return ("bin", self.rng.choice(["+", "-"]), ("name", self.rng.choice(["i", "k", "index"])), ("num", 1))
        return ("name", self.rng.choice(["i", "k", "index", "n"]))

    def bounds(self) -> tuple[Node | None, Node | None]:
        return self.rng.choice(
            [
                (("num", 1), None),
                (None, ("num", -1)),
                (None, ("name", "n")),
                (("name", "start"), ("name", "end")),
                (("num", 0), ("name", "limit")),
                (None, ("num", self.rng.randint(2, 12))),
                (("name", "i"), ("bin", "+", ("name", "i"), ("name", "size"))),
            ]
        )

    def seq(self, depth: int) -> Node:
        rng = self.rng
        r = rng.random()
        if depth <= 0 or r < 0.35:
            return self.seq_var()
        if r < 0.5:
            args = [self.lit()] if rng.random() < 0.6 else []
            return method_call(self.text(depth - 1), rng.choice(["split", "split", "rsplit"]), *args)
        if r < 0.6:
            kws = [("kw", "key", ("name", rng.choice(["len", "abs", "str.lower"])))] if rng.random() < 0.6 else []
            if rng.random() < 0.4:
                kws.append(("kw", "reverse", ("name", "True")))
            return function_call("sorted", self.seq(depth - 1), *kws)
        if r < 0.7:
            return ("slice", self.sliceable(depth - 1), *self.bounds())
        if r < 0.85:
            return self.range_call(depth)
        return method_call(_name(rng.choice(_DICT_VARS)), rng.choice(["keys", "values", "items"]))

    def sliceable(self, depth: int) -> Node:
        """A list: a sequence variable or a split string."""
        if depth <= 0 or self.rng.random() < 0.7:
            return self.seq_var()
        return method_call(self.text(depth - 1), self.rng.choice(["split", "rsplit"]), self.lit())

    def range_call(self, depth: int) -> Node:
        rng = self.rng
        stop = function_call("len", self.seq_var()) if rng.random() < 0.5 else self.operand(depth - 1)
        args: list[Node] = [stop]
        if rng.random() < 0.7:
            args.insert(0, ("num", rng.choice([0, 1])) if rng.random() < 0.7 else ("name", "start"))
            if rng.random() < 0.5:
                args.append(self.num(0) if rng.random() < 0.6 else ("bin", "-", self.num_var(), ("num", 1)))
        return function_call("range", *args)

    def cond(self, depth: int) -> Node:
        rng = self.rng
        r = rng.random()
        if depth <= 0 or r < 0.55:
            op = rng.choice(["<", "<=", ">", ">=", "==", "!="])
            return ("cmp", op, self.operand(depth - 1), self.num(depth - 1) if rng.random() < 0.6 else self.const())
        if r < 0.65:
            return ("cmp", rng.choice(["in", "not in"]), self.key(), _name(rng.choice(_DICT_VARS + _SEQ_VARS)))
        if r < 0.75:
            return method_call(self.text(depth - 1), rng.choice(["startswith", "endswith"]), self.lit())
        if r < 0.82:
            return ("cmp", rng.choice(["is", "is not"]), self.num_var(), ("name", "None"))
        if r < 0.88:
            return ("not", self.seq_var())
        return ("bool", rng.choice(["and", "or"]), self.cond(0), self.cond(0))
