"""The code scaffold's tool: `calculate`, a safe arithmetic evaluator.

Expressions are parsed with `ast` and walked node by node; only numbers, the arithmetic operators and
parentheses are accepted, so nothing a policy writes is ever executed. Exponents and magnitudes are bounded so a
sampled `9 ** 9 ** 9` fails fast instead of hanging the tool server.
"""

import ast
import math
import operator
from collections.abc import Callable

from agentrl.tool import tool

MAX_EXPONENT = 64
"""Largest allowed exponent in `a ** b`."""
MAX_MAGNITUDE = 10**30
"""Largest absolute value any intermediate result may reach."""
MAX_EXPRESSION_CHARS = 200

Number = int | float

_BINARY_OPS: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY_OPS: dict[type[ast.unaryop], Callable[[Number], Number]] = {ast.USub: operator.neg, ast.UAdd: operator.pos}


def evaluate(expression: str) -> Number:
    """The value of an arithmetic expression; ValueError with a short reason for anything else."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ValueError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        raise ValueError(f"cannot parse {expression!r}") from None
    return _checked(_eval_node(tree.body))


def _eval_node(node: ast.expr) -> Number:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY_OPS:
        return _UNARY_OPS[type(node.op)](_eval_node(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY_OPS:
        left, right = _eval_node(node.left), _eval_node(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise ValueError(f"exponent larger than {MAX_EXPONENT}")
        if isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)) and right == 0:
            raise ValueError("division by zero")
        try:
            return _checked(_BINARY_OPS[type(node.op)](left, right))
        except (ZeroDivisionError, OverflowError) as exc:  # e.g. 0 ** -1, 1e300 ** 2
            raise ValueError(str(exc)) from None
    raise ValueError(f"unsupported syntax: {ast.unparse(node)!r}")


def _checked(value: Number) -> Number:
    # complex results (negative base, fractional exponent) and huge values are refused rather than returned
    if not isinstance(value, (int, float)) or (isinstance(value, float) and not math.isfinite(value)):
        raise ValueError("result is not a finite real number")
    if abs(value) > MAX_MAGNITUDE:
        raise ValueError("result too large")
    return value


def format_number(value: Number) -> str:
    """Integers (and integral floats) without a decimal point; other floats rounded to 6 places."""
    if isinstance(value, float):
        if value.is_integer():
            return str(int(value))
        return f"{round(value, 6):.6f}".rstrip("0")
    return str(value)


@tool
def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression.

    Args:
        expression: Arithmetic using numbers, + - * / // % ** and parentheses.
    """
    return format_number(evaluate(expression))
