"""One-spot changes to a drill expression, as a one-line fix would make them (`mutate`).

An operator swapped, a constant or a string changed, a method renamed, an argument added or dropped, operands
swapped, a wrapper added or removed: `swe_drills.py` states an issue as one such change of an expression
that `swe_expressions.Gen` drew.
"""

from __future__ import annotations

import random

from agentrl.tiny.build.swe_expressions import INTS, KEYS, SEPARATORS, Node, render

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
        out += [("num", v) for v in {n + 1, n - 1, 0 if n else 1, rng.choice(INTS)} if v != n]
    if kind == "str":
        swaps = _LITERAL_SWAPS.get(node[1], (rng.choice(KEYS if node[1] in KEYS else SEPARATORS),))
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
