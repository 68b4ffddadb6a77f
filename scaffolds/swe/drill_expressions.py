"""Random small Python expressions, and plausible wrong and right variants of them, for the SWE drills.

`Gen` draws typed expression trees (names, attributes, calls, indexing, slicing, arithmetic, comparisons, string
literals), `render` writes one as Python source, and `mutate` changes one in one spot as a one-line fix would (an
operator swapped, a constant or a string changed, a method renamed, an argument added or dropped, operands
swapped, a wrapper added or removed). `scaffolds/swe/drills.py` states its issues with them.
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
_SEPARATORS = (".", ",", " ", "-", "_", ":", "/", "=", "#", ";", "|", "\\n", ", ", "://")
_KEYS = ("name", "id", "total", "count", "default", "en", "type", "size")
_INTS = (0, 1, 2, 3, 4, 5, 7, 10, 12, 24, 60, 100, 365, 1000, 1024, 9, 32, -1)
_METHOD_SWAPS = (
    ("upper", "lower"),
    ("lower", "casefold"),
    ("title", "capitalize"),
    ("split", "rsplit"),
    ("strip", "lstrip"),
    ("strip", "rstrip"),
    ("startswith", "endswith"),
    ("find", "rfind"),
    ("index", "rindex"),
    ("append", "extend"),
    ("keys", "values"),
    ("values", "items"),
    ("get", "pop"),
    ("min", "max"),
    ("sum", "len"),
    ("any", "all"),
    ("floor", "ceil"),
    ("sorted", "reversed"),
    ("round", "int"),
    ("ljust", "rjust"),
)


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
        return ("num", self.rng.choice(_INTS[:-1]))

    def lit(self) -> Node:
        return ("str", self.rng.choice(_SEPARATORS))

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
        return ("str", self.rng.choice(_KEYS))

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
        return ("str", self.rng.choice(["", *_SEPARATORS]))

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


# --- mutations --------------------------------------------------------------------------------------------------

_OP_SWAPS = {
    "+": ("-", "*"),
    "-": ("+",),
    "*": ("/", "+", "//"),
    "/": ("*", "//"),
    "//": ("/", "%"),
    "%": ("//",),
    "<": ("<=", ">"),
    "<=": ("<", ">="),
    ">": (">=", "<"),
    ">=": (">", "<="),
    "==": ("!=",),
    "!=": ("==",),
    "in": ("not in",),
    "not in": ("in",),
    "is": ("is not",),
    "is not": ("is",),
    "and": ("or",),
    "or": ("and",),
}
_FEWEST_ARGUMENTS = {
    "split": 0, "rsplit": 0, "strip": 0, "lstrip": 0, "rstrip": 0, "pop": 0,
    "round": 1, "range": 1, "get": 1, "sorted": 1,
}  # fmt: skip
"""Calls whose last argument a fix may drop, and how many arguments they keep at least."""
_EXTRA_ARGUMENT = {
    ("split", 0): ("str", " "),
    ("split", 1): ("num", 1),
    ("rsplit", 0): ("str", "."),
    ("rsplit", 1): ("num", 1),
    ("strip", 0): ("str", "\\n"),
    ("round", 1): ("num", 2),
    ("range", 1): ("num", 1),
    ("range", 2): ("num", 2),
    ("get", 1): ("num", 0),
    ("sorted", 1): ("kw", "reverse", ("name", "True")),
}
"""(call, its positional arguments) → an argument a fix may add."""
_ONE_ARGUMENT = frozenset({"round", "int", "sorted", "reversed", "sum", "len", "any", "all"})
"""Functions that are swapped for their partner only when called with one argument."""
_LITERAL_SWAPS = {".": (",", "_"), ",": (";", " "), " ": ("", ","), "-": ("_", " "), "_": ("-", ".")}


def _walk(node: Node, path: tuple[int, ...] = ()) -> list[tuple[tuple[int, ...], Node]]:
    """Every node with its path of child positions (lists of call arguments count as one level)."""
    out = [(path, node)]
    for k, child in enumerate(node[1:], 1):
        if isinstance(child, tuple):
            out += _walk(child, (*path, k))
        elif isinstance(child, list):
            for j, arg in enumerate(child):
                out += _walk(arg, (*path, k, j))
    return out


def _put(node: Node, path: tuple[int, ...], new: Node) -> Node:
    if not path:
        return new
    k, rest = path[0], path[1:]
    child = node[k]
    if isinstance(child, list):
        j, rest = rest[0], rest[1:]
        child = [*child[:j], _put(child[j], rest, new), *child[j + 1 :]]
    else:
        child = _put(child, rest, new)
    return (*node[:k], child, *node[k + 1 :])


def _variants(rng: random.Random, node: Node, numeric: bool) -> list[Node]:
    """What a one-spot fix could turn `node` into (not including the node itself)."""
    kind = node[0]
    out: list[Node] = []
    if kind in ("bin", "cmp", "bool"):
        out += [(kind, op, node[2], node[3]) for op in _OP_SWAPS.get(node[1], ())]
        if node[1] in ("-", "/", "//", "%", "<", ">") and node[2] != node[3]:
            out.append((kind, node[1], node[3], node[2]))
        if kind == "bin" and node[3][0] == "num":
            out.append(node[2])
    if kind == "num":
        n = node[1]
        out += [("num", v) for v in {n + 1, n - 1, 0 if n else 1, rng.choice(_INTS)} if v != n]
    if kind == "str":
        swaps = _LITERAL_SWAPS.get(node[1], (rng.choice(_KEYS if node[1] in _KEYS else _SEPARATORS),))
        out += [("str", s) for s in swaps if s != node[1]]
    if kind == "call":
        func, args = node[1], node[2]
        name = func[2] if func[0] == "attr" else func[1]
        positional = [a for a in args if a[0] != "kw"]
        for a, b in _METHOD_SWAPS:
            other = b if name == a else a if name == b else None
            if other is not None and (len(args) <= 1 or name not in _ONE_ARGUMENT):
                renamed = ("attr", func[1], other) if func[0] == "attr" else ("name", other)
                out.append(("call", renamed, args))
        least = _FEWEST_ARGUMENTS.get(name)
        if least is not None and len(args) > least:
            out.append(("call", func, args[:-1]))
        extra = _EXTRA_ARGUMENT.get((name, len(positional)))
        if extra is not None and not any(a[0] == "kw" for a in args):
            if name == "sorted" and len(args) == 1:
                extra = ("kw", "reverse", ("name", "True"))
            out.append(("call", func, [*args, extra]))
    if kind == "index" and node[2][0] == "num":
        out += [("index", node[1], ("num", v)) for v in (0, 1, -1) if v != node[2][1]]
    if kind == "slice":
        out += [
            ("slice", node[1], lo, hi) for lo, hi in ((("num", 1), None), (None, ("num", -1))) if (lo, hi) != node[2:]
        ]
    if kind == "not":
        out.append(node[1])
    if numeric and kind in ("name", "attr", "bin", "call") and rng.random() < 0.5:
        out += [("bin", rng.choice(["+", "-"]), node, ("num", 1)), ("bin", "*", ("num", 2), node)]
    return out


def mutate(
    rng: random.Random, tree: Node, *, numeric: bool, avoid: tuple[str, ...] = (), quote: str = '"'
) -> Node | None:
    """`tree` changed in one spot, as a one-line fix would change it, with a source that differs from the tree's
    own and from every `avoid`; None when no such change was found. `numeric`: the tree is a number, so a fix
    may also add or take away a term or a factor."""
    avoid = (*avoid, render(tree, quote))
    sites = _walk(tree)
    for _ in range(30):
        path, node = rng.choice(sites)
        if node[0] == "kw" or (node[0] == "name" and node[1] in ("self", "True", "None")):
            continue
        options = _variants(rng, node, numeric and (not path or node[0] == "bin"))
        if not options:
            continue
        new = _put(tree, path, rng.choice(options))
        if render(new, quote) not in avoid:
            return new
    return None
