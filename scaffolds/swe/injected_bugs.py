"""One-line bugs injected into working Python source, each with an easy-tier problem statement.

A site is an expression a function returns, tests (`if` / `elif` / `while`), assigns or loops over, on one line of a
module outside the tests. A bug changes one token of it, the way the bugs of the bundled easy tier look and the
way SWE-smith's procedural modifications do (arXiv 2504.21798): an arithmetic, comparison or boolean operator
swapped, an integer constant moved by one, the operands of a non-commutative operator swapped, a `not` dropped,
or a call's name traded for its counterpart (`min`/`max`, `lstrip`/`rstrip`, `split`/`rsplit`, ...). The edit
is spliced into the line's own text, so the rest of the line keeps its formatting and the fix is exactly the
original line.

The statement names the file, the function and both expressions as the easy tier does ("In `pkg/mod.py`,
`Cart.total` returns `price - tax`; it should return `price + tax`."). Whether a bug changes behaviour is not
decided here: `synthesis` keeps only those some test catches.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

MAX_EXPRESSION_CHARS = 70
"""Longest expression a statement quotes (as in the SWE drills)."""

_SYMBOL = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**",
    ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=",
    ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not", ast.And: "and", ast.Or: "or",
}  # fmt: skip
_SWAPS = {
    "+": ("-",), "-": ("+",), "*": ("/", "+"), "/": ("*", "//"), "//": ("/", "%"), "%": ("//",), "**": ("*",),
    "<": ("<=", ">"), "<=": ("<", ">="), ">": (">=", "<"), ">=": (">", "<="), "==": ("!=",), "!=": ("==",),
    "in": ("not in",), "not in": ("in",), "is": ("is not",), "is not": ("is",), "and": ("or",), "or": ("and",),
}  # fmt: skip
_COUNTERPARTS = {
    "min": "max", "max": "min", "lstrip": "rstrip", "rstrip": "lstrip", "split": "rsplit", "rsplit": "split",
    "startswith": "endswith", "endswith": "startswith", "upper": "lower", "lower": "upper", "floor": "ceil",
    "ceil": "floor", "any": "all", "all": "any", "sorted": "reversed", "find": "rfind", "rfind": "find",
    "index": "rindex", "rindex": "index", "ljust": "rjust", "rjust": "ljust",
}  # fmt: skip
_NON_COMMUTATIVE = (ast.Sub, ast.Div, ast.FloorDiv, ast.Mod)


@dataclass(frozen=True)
class Site:
    """An expression on one line of a module that a bug may change."""

    path: str
    function: str
    """`name` or `Class.name`."""
    kind: str
    """`returns`, `checks`, `computes` or `uses` (a `for` loop's iterable)."""
    line_no: int
    """1-based."""
    prefix: str
    """`if ` / `elif ` / `while ` for `checks`, `for x in ` for `uses`, else empty: part of what the statement
    quotes."""
    expr: ast.expr


@dataclass(frozen=True)
class Bug:
    """One injected bug: the line as it is (the fix) and as the bug leaves it."""

    path: str
    line_no: int
    fixed_line: str
    buggy_line: str
    statement: str

    def apply(self, source: str) -> str:
        """`source` (the working module) with the bug in it."""
        lines = source.splitlines(keepends=True)
        if lines[self.line_no - 1].rstrip("\r\n") != self.fixed_line:
            raise ValueError(f"{self.path}:{self.line_no} is not the line this bug was drawn from")
        ending = lines[self.line_no - 1][len(self.fixed_line) :]
        lines[self.line_no - 1] = self.buggy_line + ending
        return "".join(lines)


def sites(path: str, source: str) -> list[Site]:
    """The single-line, ASCII expressions in `source`'s functions that a statement can quote."""
    tree = ast.parse(source)
    lines = source.splitlines()
    found: list[Site] = []

    def visit(node: ast.AST, owner: str | None, function: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, child.name, None)
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{owner}.{child.name}" if owner and function is None else (function or child.name)
                visit(child, None, name)
            else:
                if function is not None:
                    site = _site(path, function, child, lines)
                    if site is not None:
                        found.append(site)
                visit(child, owner, function)

    visit(tree, None, None)
    return found


def _site(path: str, function: str, node: ast.AST, lines: list[str]) -> Site | None:
    if isinstance(node, ast.Return) and node.value is not None:
        kind, expr = "returns", node.value
    elif isinstance(node, ast.If | ast.While):
        kind, expr = "checks", node.test
    elif isinstance(node, ast.Assign | ast.AugAssign) and node.value is not None:
        kind, expr = "computes", node.value
    elif isinstance(node, ast.For):
        kind, expr = "uses", node.iter
    else:
        return None
    if expr.lineno != expr.end_lineno or expr.end_col_offset is None:
        return None
    line = lines[expr.lineno - 1]
    if not line.isascii() or expr.end_col_offset - expr.col_offset > MAX_EXPRESSION_CHARS:
        return None
    prefix = ""
    if kind == "checks":
        keyword = line[: expr.col_offset].strip()
        if keyword not in ("if", "elif", "while"):
            return None
        prefix = keyword + " "
    elif kind == "uses":  # `for i in range(3)`: the loop header up to the iterable is quoted with it
        prefix = line[: expr.col_offset].lstrip()
        if not (prefix.startswith("for ") and prefix.endswith(" in ")):
            return None
    return Site(path, function, kind, expr.lineno, prefix, expr)


def bugs(site: Site, line: str) -> list[Bug]:
    """Every one-token bug of `site` (whose source line is `line`), in a fixed order."""
    out = []
    for start, end, text in _edits(site.expr, line):
        buggy_line = line[:start] + text + line[end:]
        shift = len(text) - (end - start)
        right = line[site.expr.col_offset : site.expr.end_col_offset]
        wrong = buggy_line[site.expr.col_offset : site.expr.end_col_offset + shift]
        if wrong == right or len(wrong) > MAX_EXPRESSION_CHARS:
            continue
        out.append(Bug(site.path, site.line_no, line, buggy_line, statement(site, wrong, right)))
    return out


def statement(site: Site, wrong: str, right: str) -> str:
    """The easy-tier problem statement for a bug that turned `right` into `wrong` at `site`."""
    head = f"In `{site.path}`, `{site.function}`"
    if site.kind == "returns":
        return f"{head} returns `{wrong}`; it should return `{right}`."
    if site.kind == "checks":
        return f"{head} checks `{site.prefix}{wrong}`; it should check `{site.prefix}{right}`."
    if site.kind == "uses":
        return f"{head} uses `{site.prefix}{wrong}`; it should use `{site.prefix}{right}`."
    return f"{head} computes `{wrong}`; it should compute `{right}`."


def unique_bugs(site: Site, source: str) -> list[Bug]:
    """The bugs of `site` (a site of the module `source`) whose quoted expression occurs once in the buggy module:
    a `str_replace` of it is unambiguous."""
    line = source.splitlines()[site.line_no - 1]
    return [bug for bug in bugs(site, line) if bug.apply(source).count(quoted_wrong(bug)) == 1]


def quoted_wrong(bug: Bug) -> str:
    """What the statement says the file holds now (the text a fix replaces)."""
    return bug.statement.split("`")[5]


def quoted_right(bug: Bug) -> str:
    """What the statement says the file should hold (the fix's text)."""
    return bug.statement.split("`")[7]


def _edits(expr: ast.expr, line: str) -> list[tuple[int, int, str]]:
    """(start, end, replacement) column edits of `line`, one token each, for the nodes inside `expr`."""
    edits: list[tuple[int, int, str]] = []
    for node in ast.walk(expr):
        if isinstance(node, ast.BinOp):
            edits += _operator_swaps(line, type(node.op), node.left, node.right)
            if isinstance(node.op, _NON_COMMUTATIVE):
                edits += _operand_swap(line, node.left, node.right)
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for op, before, after in zip(node.ops, operands, operands[1:], strict=False):
                edits += _operator_swaps(line, type(op), before, after)
        elif isinstance(node, ast.BoolOp):
            for before, after in zip(node.values, node.values[1:], strict=False):
                edits += _operator_swaps(line, type(node.op), before, after)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            edits.append((node.col_offset, node.end_col_offset or 0, _text(line, node.operand)))
        elif isinstance(node, ast.Call):
            edits += _counterpart(line, node.func)
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            edits += _constant(line, node, expr)
    return edits


def _text(line: str, node: ast.AST) -> str:
    return line[node.col_offset : node.end_col_offset]


def _operator_swaps(line: str, op: type, before: ast.AST, after: ast.AST) -> list[tuple[int, int, str]]:
    """Replace the operator between `before` and `after` (it sits in the gap, perhaps between parentheses)."""
    symbol = _SYMBOL.get(op)
    gap_start, gap_end = before.end_col_offset or 0, after.col_offset
    gap = line[gap_start:gap_end]
    core = gap.strip(" ()")
    if symbol is None or " ".join(core.split()) != symbol:
        return []
    start = gap_start + gap.index(core)
    return [(start, start + len(core), new) for new in _SWAPS[symbol]]


def _operand_swap(line: str, left: ast.AST, right: ast.AST) -> list[tuple[int, int, str]]:
    left_text, right_text = _text(line, left), _text(line, right)
    gap = line[left.end_col_offset or 0 : right.col_offset]
    if set(gap) & set("()") or left_text == right_text:
        return []  # a parenthesised operand's bounds are not its node's: leave it
    return [(left.col_offset, right.end_col_offset or 0, right_text + gap + left_text)]


def _counterpart(line: str, func: ast.expr) -> list[tuple[int, int, str]]:
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    if name not in _COUNTERPARTS:
        return []
    end = func.end_col_offset or 0
    if line[end - len(name) : end] != name:
        return []
    return [(end - len(name), end, _COUNTERPARTS[name])]


def _constant(line: str, node: ast.Constant, expr: ast.expr) -> list[tuple[int, int, str]]:
    if _text(line, node) != str(node.value):
        return []  # 0x10, 1_000: leave spellings a statement would garble
    negated = any(
        isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub) and n.operand is node for n in ast.walk(expr)
    )
    values = [node.value + 1] + ([node.value - 1] if node.value > 0 and not negated else [])
    return [(node.col_offset, node.end_col_offset or 0, str(v)) for v in values]
