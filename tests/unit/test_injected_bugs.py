"""Injected one-token bugs: where they go, what they change, and the statements that describe them."""

import pytest
from agentrl.scaffolds.swe import injected_bugs
from agentrl.scaffolds.swe.injected_bugs import quoted_wrong

pytestmark = pytest.mark.unit

SOURCE = """\
TAX = 0.2


class Cart:
    def total(self, price, count):
        subtotal = price * count
        if count >= 10 and not self.member:
            return subtotal - self.discount(subtotal)
        return max(subtotal, 0)

    def label(self, name):
        return name.lstrip("-").upper()


def pages(total, per_page):
    for i in range(1, total // per_page):
        pass
    while total > 0:
        total -= per_page
    return (total + per_page - 1) // per_page


def last(items):
    return items[-1]
"""


def all_bugs(source=SOURCE, path="shop/cart.py"):
    lines = source.splitlines()
    return [b for s in injected_bugs.sites(path, source) for b in injected_bugs.bugs(s, lines[s.line_no - 1])]


def test_sites_are_the_returns_tests_assignments_and_loops_of_functions_only():
    found = {(s.function, s.kind, s.prefix) for s in injected_bugs.sites("shop/cart.py", SOURCE)}
    assert ("Cart.total", "computes", "") in found
    assert ("Cart.total", "checks", "if ") in found
    assert ("Cart.total", "returns", "") in found
    assert ("Cart.label", "returns", "") in found
    assert ("pages", "uses", "for i in ") in found
    assert ("pages", "checks", "while ") in found
    assert ("pages", "computes", "") in found  # the augmented assignment
    assert all(s.line_no != 1 for s in injected_bugs.sites("shop/cart.py", SOURCE))  # module level: no function


def test_each_bug_changes_one_token_and_keeps_the_rest_of_the_line():
    bugs = all_bugs()
    by_line = {(b.fixed_line.strip(), b.buggy_line.strip()) for b in bugs}
    assert ("subtotal = price * count", "subtotal = price / count") in by_line
    assert ("if count >= 10 and not self.member:", "if count > 10 and not self.member:") in by_line
    assert ("if count >= 10 and not self.member:", "if count >= 11 and not self.member:") in by_line
    assert ("if count >= 10 and not self.member:", "if count >= 10 or not self.member:") in by_line
    assert ("if count >= 10 and not self.member:", "if count >= 10 and self.member:") in by_line
    assert ("return max(subtotal, 0)", "return min(subtotal, 0)") in by_line
    assert ('return name.lstrip("-").upper()', 'return name.rstrip("-").upper()') in by_line  # quotes kept
    assert ('return name.lstrip("-").upper()', 'return name.lstrip("-").lower()') in by_line
    assert ("for i in range(1, total // per_page):", "for i in range(2, total // per_page):") in by_line
    assert ("return items[-1]", "return items[-2]") in by_line
    assert ("return items[-1]", "return items[-0]") not in by_line  # a negated constant only grows
    for bug in bugs:
        assert bug.fixed_line != bug.buggy_line
        assert bug.fixed_line.startswith(bug.buggy_line[: len(bug.buggy_line) - len(bug.buggy_line.lstrip())])


def test_operands_are_swapped_only_when_their_bounds_are_plain():
    lines = {b.buggy_line.strip() for b in all_bugs()}
    assert "return subtotal - self.discount(subtotal)" in {b.fixed_line.strip() for b in all_bugs()}
    assert "return self.discount(subtotal) - subtotal" in lines
    # `(total + per_page - 1) // per_page`: the left operand is parenthesised, so no swap is offered
    assert not any(line.startswith("return per_page //") for line in lines)


def test_statements_quote_both_expressions_as_the_easy_tier_does():
    bug = next(b for b in all_bugs() if b.buggy_line.strip() == "return min(subtotal, 0)")
    assert (
        bug.statement
        == "In `shop/cart.py`, `Cart.total` returns `min(subtotal, 0)`; it should return `max(subtotal, 0)`."
    )
    check = next(b for b in all_bugs() if b.buggy_line.strip() == "while total >= 0:")
    assert check.statement == "In `shop/cart.py`, `pages` checks `while total >= 0`; it should check `while total > 0`."
    loop = next(b for b in all_bugs() if "range(2," in b.buggy_line)
    assert quoted_wrong(loop) == "for i in range(2, total // per_page)"


def test_apply_puts_the_bug_in_and_refuses_a_different_file():
    bug = next(b for b in all_bugs() if b.buggy_line.strip() == "return min(subtotal, 0)")
    buggy = bug.apply(SOURCE)
    assert buggy.count("return min(subtotal, 0)") == 1 and "max(subtotal" not in buggy
    assert len(buggy.splitlines()) == len(SOURCE.splitlines())
    with pytest.raises(ValueError, match="not the line"):
        bug.apply(SOURCE.replace("max(subtotal, 0)", "abs(subtotal)"))


def test_long_or_non_ascii_lines_are_left_alone():
    source = 'def f(x):\n    return x + "é"\n\n\ndef g(x):\n    return ' + " + ".join(["x"] * 40) + "\n"
    assert all_bugs(source) == []
