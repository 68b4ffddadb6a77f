"""Synthetic drills for the SWE scaffold's easy tier: warm-starting a small policy on one-line fixes.

An easy problem statement names the file, the function, the wrong expression and the right one ("In
`geom/shapes.py`, `Rectangle.perimeter` returns `self.width + self.height`; it should return
`2 * (self.width + self.height)`."), so the fix is a `str_replace` of the one by the other and a `submit`. The tiny
policy sees no tool schemas and learns the tools and their arguments from demonstrations alone; the few bundled
easy tasks would teach it their statements rather than the skill (copy the path and the two expressions into
the right arguments). A drill therefore draws a statement at random: a module path, a function or
`Class.method`, a small Python expression (names, attributes, calls, indexing, slicing, arithmetic, comparisons,
string literals in either kind of quotes) and a variant of it as a fix would change it (an operator swapped, a
constant or a string changed, a method renamed, an argument added or dropped, operands swapped, a wrapper added
or removed). The conversation has the format of a real episode: the scaffold's system prompt and issue message,
sometimes a `run_tests` call first, the `str_replace` with the editor's real reply, and `submit` with its reply,
which ends the episode.

The bundled tasks are never used for drills: no drill's statement is a bundled one, and none names a file or
function of a held-out (`test`) easy task.

With probability `retry_rate` (default 0: the stream is then unchanged), a correct drill's first `str_replace`
slips (the wrong expression or the path miscopied, or `new_str` left out), gets the real tool's error, and the
drill tries again, right this time: a policy that never sees a failed call answered by another one submits after
its first error, and RL has no retry to reinforce. The slipped call is marked `"loss": false`, so fine-tuning
learns the recovery and not the slip.

With probability `mistake_rate` a drill is deliberately wrong, so the warm-started policy is imperfect and RL has
something to fix:

- `no_edit`: submits without editing;
- `wrong_fix`: replaces the wrong expression by another wrong variant of it, then submits;
- `miscopy`: calls `str_replace` with the wrong expression miscopied, gets the editor's "does not occur" error
  and submits anyway.
"""

from __future__ import annotations

import functools
import posixpath
import random
import re
from dataclasses import dataclass
from typing import Any

from agentrl.scaffolds.demonstration import made_up_name, tool_call_messages
from agentrl.scaffolds.swe.scaffold import SYSTEM_PROMPT
from agentrl.tiny.build.swe_expressions import Gen, Node, function_call, method_call, render
from agentrl.tiny.build.swe_mutations import mutate

MISTAKES = {"no_edit": 0.3, "wrong_fix": 0.35, "miscopy": 0.35}
"""Relative frequency of each kind of mistake."""
RETRY_SLIPS = {"old_str": 0.6, "path": 0.25, "new_str": 0.15}
"""What the first attempt of a retried drill gets wrong, and how often."""
RUN_TESTS_RATE = 0.3
"""How often a drill runs the visible tests before editing (as the scripted expert does)."""
SUBMITTED = "Submitted: the diff of the workspace against the original repository is your patch. The task is over."
"""What `submit` answers (`tools/swe/swe_tools.py`)."""
RUN_TESTS_NOTE = "Let me run the tests first."
MADE_UP_RATE = 0.5
"""How often a word of a drill's path or function name is made up (`made_up_name`) instead of a common one."""
MAX_EXPRESSION_CHARS = 70
"""Longest expression a statement quotes (the bundled ones are at most about 40 characters)."""


def edited(path: str, line: int) -> str:
    """`str_replace`'s reply to a one-line replacement starting on `line` (`tools/files/file_editor.py`)."""
    return f"edited {path}: replaced lines {line}-{line}"


def not_found(path: str) -> str:
    """`str_replace`'s error when `old_str` is not in the file (`tools/files/file_editor.py`)."""
    return f"old_str does not occur in {path}; view the file and copy the text exactly"


def no_such_file(path: str) -> str:
    """The sandbox's error when the file to edit does not exist (`agentrl/sandbox/worker.py`)."""
    return f"No such file or directory: /workspace/{path}"


def missing_argument(name: str) -> str:
    """The tool server's error for a `str_replace` call without argument `name` (`agentrl/tool.py`)."""
    return f"bad arguments for str_replace: field '{name}': Field required"


# --- vocabulary -----------------------------------------------------------------------------------------------

_PACKAGES = (
    "geomkit shapes inventory listutil mathkit strtools wordcount units ledger textkit datekit payroll "
    "gradebook weather scheduler invoices parsers formatter csvtools jsonkit vectors stats recipes playlist "
    "library parking tickets budget sensors routes timesheet shipping tariffs quiz markdown tokenizer colors "
    "matrixlib queues graphs bitops cipher checksum humanize paginate retry throttle semver slugs money "
    "calendar taxes loans scores elevator thermostat garden ranking rating cache archive mailer"
).split()
_MODULES = (
    "core utils helpers models ops shapes stock chunks case count fmt convert ext parse io math text table "
    "report rules api views store items cart order prices rates tools base stats render format calc time "
    "dates config loader writer reader search sort filters metrics rounding bounds paging"
).split()
_CLASSES = (
    "Rectangle Circle Square Stock Account Invoice Timer Cart Matrix Parser Buffer Queue Ledger Grid Counter "
    "Playlist Order Vector Budget Thermostat Elevator Inventory Schedule Tokenizer Report Table Range Window "
    "Histogram Basket Wallet Clock Meter Gauge Sensor Route Tariff Loan Grade Roster Pager Limiter Cache"
).split()
_METHOD_VERBS = (
    "get set add remove total count parse format compute load save find check update reset scale clamp "
    "render split merge convert normalize validate average apply resize shift advance peek pop push"
).split()
_FUNC_NOUNS = (
    "price items words total header path score duration length area perimeter ratio index offset balance "
    "discount interest tokens lines fields rows page value key name size limit average median width height "
    "speed distance tax fee label version slug color weight days hours minutes"
).split()
_QUANTITIES = (
    "minutes hours|the total|the average|the index|the offset|the area|the ratio|the remainder|the page count|"
    "the discount|the width|the end position|the last index|the number of pages|the tax"
).split("|")
_PURPOSES = (
    "the first word|the last part|the separator|the key|the default|the total|the upper bound|the file name|"
    "the count|the step|the comparison|the lookup|the fallback value|each row"
).split("|")
_TAILS = (
    " so that the last element is included",
    " so that empty input is handled",
    " so that the result is not off by one",
    " so that ties keep their order",
    " so that the units match",
    " so that the bound itself is allowed",
    " (the operands are the wrong way round)",
    " (off by one)",
    " so that upper-case input matches too",
)


# --- statements -----------------------------------------------------------------------------------------------


@functools.cache
def bundled_statements() -> frozenset[str]:
    """Every bundled task's problem statement (no drill states one)."""
    from agentrl.scaffolds.swe import bundled

    return frozenset(i.problem_statement.strip() for i in bundled.instances())


def quoted_spans(statement: str) -> list[str]:
    """What an easy statement quotes, in order: the file, the function, the wrong expression, the right one."""
    return re.findall(r"`([^`]*)`", statement)


@functools.cache
def held_out_names() -> frozenset[str]:
    """The file paths and functions held-out easy statements name (no drill names one)."""
    from agentrl.scaffolds.swe import bundled

    names = set()
    for i in bundled.instances():
        if i.tier == "easy" and i.split == "test":
            names.update(quoted_spans(i.problem_statement)[:2])
    return frozenset(names)


def _word(rng: random.Random, words: list[str]) -> str:
    """One of `words`, or (`MADE_UP_RATE`) a made-up one: a path or name to copy, not to recall."""
    return made_up_name(rng, max_chars=8) if rng.random() < MADE_UP_RATE else rng.choice(words)


def _path(rng: random.Random) -> str:
    package = _word(rng, _PACKAGES)
    module = _word(rng, _MODULES)
    r = rng.random()
    if r < 0.1:
        return f"{package}/{_word(rng, _MODULES)}/{module}.py"
    if r < 0.15:
        return f"src/{package}/{module}.py"
    return f"{package}/{module}.py"


def _function(rng: random.Random) -> tuple[str, bool]:
    """A function or `Class.method` name, and whether it is a method."""
    if rng.random() < 0.45:
        method = _word(rng, _METHOD_VERBS + _FUNC_NOUNS)
        if rng.random() < 0.4:
            method = f"{rng.choice(_METHOD_VERBS)}_{_word(rng, _FUNC_NOUNS)}"
        return f"{_word(rng, _CLASSES).capitalize()}.{method}", True
    r = rng.random()
    if r < 0.6:
        return f"{rng.choice(_METHOD_VERBS)}_{_word(rng, _FUNC_NOUNS)}", False
    if r < 0.8:
        source, target = rng.sample(_FUNC_NOUNS, 2)
        return f"{source}_to_{target}", False
    return _word(rng, _FUNC_NOUNS + _METHOD_VERBS), False


def _phrase(rng: random.Random, gen: Gen) -> tuple[str, Node, str, bool]:
    """A statement shape: (template with {w} and {r}, expression tree, span prefix, numeric)."""
    kind = rng.choices(
        ["returns", "computes", "checks", "divides", "steps", "uses", "splits", "sorts", "compares", "joins"],
        weights=[4, 3, 3, 1, 1, 3, 1, 1, 1, 1],
    )[0]
    if kind == "returns":
        make = rng.choice([gen.operand, gen.operand, gen.text, gen.seq, gen.cond])
        verb = rng.choice(["it should return {r}", "it should return {r}", "it should be {r}"])
        return "returns {w}; " + verb, make(2), "", make == gen.operand
    if kind == "computes":
        if rng.random() < 0.5:
            return f"computes {rng.choice(_QUANTITIES)} as {{w}}; it should be {{r}}", gen.operand(2), "", True
        return "computes {w}; it should compute {r}", gen.operand(2), "", True
    if kind == "checks":
        prefix = rng.choices(["if ", "elif ", "while "], weights=[17, 2, 1])[0]
        return "checks {w}; it should check {r}", gen.cond(2), prefix, False
    if kind == "divides":
        verb = rng.choice([("divides by", "divide by"), ("multiplies by", "multiply by")])
        return f"{verb[0]} {{w}}; it should {verb[1]} {{r}}", gen.operand(1), "", True
    if kind == "steps":
        return "steps with {w}; it should be {r}", gen.range_call(2), "", False
    if kind == "uses":
        make = rng.choice([gen.operand, gen.text, gen.seq])
        tree = make(2)
        purpose = f" for {rng.choice(_PURPOSES)}" if rng.random() < 0.5 else ""
        verb = rng.choice(["it should be {r}", "it should use {r}"])
        return f"uses {{w}}{purpose}; {verb}", tree, "", make == gen.operand
    if kind == "splits":
        args = [gen.lit()] if rng.random() < 0.7 else []
        tree = method_call(gen.text(1), rng.choice(["split", "rsplit"]), *args)
        return "splits with {w}; it should use {r}", tree, "", False
    if kind == "sorts":
        kws: list[Node] = (
            [("kw", "key", ("name", rng.choice(["len", "abs", "str.lower"])))] if rng.random() < 0.6 else []
        )
        if rng.random() < 0.4:
            kws.append(("kw", "reverse", ("name", "True")))
        return "sorts with {w}; it should sort with {r}", function_call("sorted", gen.seq(1), *kws), "", False
    if kind == "compares":
        return "compares {w}; it should compare {r}", gen.cond(1), "", False
    return "joins with {w}; it should join with {r}", method_call(gen.joiner(), "join", gen.seq(1)), "", False


@dataclass(frozen=True)
class Drill:
    """One drawn issue: the statement, and what the fix replaces by what."""

    statement: str
    path: str
    wrong: str
    right: str
    wrong_fix: str
    """Another wrong variant of `wrong` (what the `wrong_fix` mistake puts in its place)."""


def draw(rng: random.Random, *, made_up_operands: float = 0.0) -> Drill:
    """A random easy-tier issue; never a bundled statement, and naming no held-out task's file or function.
    `made_up_operands`: how often a variable, attribute or constant of the expressions is made up."""
    while True:
        path = _path(rng)
        function, is_method = _function(rng)
        if path in held_out_names() or function in held_out_names():
            continue
        gen = Gen(rng, is_method, made_up=made_up_operands)
        template, tree, prefix, numeric = _phrase(rng, gen)
        quote = '"' if rng.random() < 0.6 else "'"
        other = mutate(rng, tree, numeric=numeric, quote=quote)
        if other is None:
            continue
        right_tree, wrong_tree = (tree, other) if rng.random() < 0.5 else (other, tree)
        wrong, right = prefix + render(wrong_tree, quote), prefix + render(right_tree, quote)
        bad_fix = mutate(rng, wrong_tree, numeric=numeric, avoid=(render(right_tree, quote),), quote=quote)
        if bad_fix is None:
            continue
        if "`" in wrong + right or max(len(wrong), len(right)) > MAX_EXPRESSION_CHARS:
            continue
        tail = rng.choice(_TAILS) if rng.random() < 0.15 else ""
        body = template.format(w=f"`{wrong}`", r=f"`{right}`")
        statement = f"In `{path}`, `{function}` {body}{tail}."
        if statement not in bundled_statements():
            return Drill(statement, path, wrong, right, prefix + render(bad_fix, quote))


def issue_message(statement: str) -> str:
    """The user message of an SWE episode (`SweScaffold.initial_messages`)."""
    return f"<issue>\n{statement}\n</issue>\n\nThe repository is at /workspace. Fix the issue."


def miscopy(rng: random.Random, text: str) -> str:
    """`text` copied with one slip (a character changed, dropped or doubled, a space lost or added, the other
    quotes), so that it is not a part of `text` nor `text` behind indentation: a file holding `text` does not
    hold it."""
    for _ in range(100):
        k = rng.randrange(len(text))
        slip = rng.random()
        if slip < 0.2 and ('"' in text or "'" in text):
            copy = text.replace('"', "'") if '"' in text else text.replace("'", '"')
        elif slip < 0.4 and " " in text:
            spaces = [j for j, c in enumerate(text) if c == " "]
            j = rng.choice(spaces)
            copy = text[:j] + text[j + 1 :]
        elif slip < 0.55:
            copy = text[:k] + text[k] + text[k:]
        elif slip < 0.7:
            copy = text[:k] + text[k + 1 :]
        elif text[k].isdigit():
            copy = text[:k] + rng.choice([d for d in "0123456789" if d != text[k]]) + text[k + 1 :]
        elif text[k].isalpha():
            copy = text[:k] + rng.choice([c for c in "aeioulnrst" if c != text[k].lower()]) + text[k + 1 :]
        else:
            copy = text[:k] + " " + text[k:]
        if copy and copy == copy.strip() and copy not in text:
            return copy
    return text + "_"


def tests_output(rng: random.Random) -> str:
    """`run_tests`' reply when the visible tests pass, as pytest -q prints it."""
    n = rng.randint(1, 8)
    seconds = rng.choice(["0.01", "0.01", "0.02", "0.03", "0.05", "0.08", "0.12"])
    return f"{'.' * n:<73}[100%]\n{n} passed in {seconds}s\n[pytest exit code 0]"


def _call_id(turn: int) -> str:
    """The id the runtime gives a turn's first tool call."""
    return f"call_{turn}_0"


def failed_attempt(rng: random.Random, drill: Drill) -> tuple[dict[str, str], str]:
    """A first `str_replace` for `drill` with one slip (`RETRY_SLIPS`), and the error it gets."""
    slip = rng.choices(list(RETRY_SLIPS), weights=list(RETRY_SLIPS.values()))[0]
    arguments = {"path": drill.path, "old_str": drill.wrong, "new_str": drill.right}
    if slip == "old_str":
        arguments["old_str"] = miscopy(rng, drill.wrong)
        return arguments, not_found(drill.path)
    if slip == "path":
        arguments["path"] = _miscopied_path(rng, drill.path)
        return arguments, no_such_file(arguments["path"])
    del arguments["new_str"]
    return arguments, missing_argument("new_str")


def _miscopied_path(rng: random.Random, path: str) -> str:
    """`path` with a slip that names another file (`a//b.py` or `a/./b.py` would still be `a/b.py`)."""
    while True:
        copy = miscopy(rng, path)
        if posixpath.normpath(copy) != posixpath.normpath(path) and "//" not in copy:
            return copy


def demonstration(
    rng: random.Random,
    *,
    mistake_rate: float,
    made_up_operands: float = 0.0,
    retry_rate: float = 0.0,
    drill: Drill | None = None,
) -> list[dict[str, Any]]:
    """One easy-tier drill (OpenAI message dicts), deliberately wrong with probability `mistake_rate`; a correct
    one retries after a failed first edit with probability `retry_rate`. `drill` (default: drawn here) is the
    issue demonstrated, such as a `swe_code_drills` one."""
    drill = drill if drill is not None else draw(rng, made_up_operands=made_up_operands)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": issue_message(drill.statement)},
    ]
    mistake = rng.choices(list(MISTAKES), weights=list(MISTAKES.values()))[0] if rng.random() < mistake_rate else None
    turn = 0
    if rng.random() < RUN_TESTS_RATE:
        messages += tool_call_messages(
            "run_tests", {}, tests_output(rng), call_id=_call_id(turn), content=RUN_TESTS_NOTE
        )
        turn += 1
    if mistake is None and retry_rate and rng.random() < retry_rate:
        arguments, error = failed_attempt(rng, drill)
        attempt = tool_call_messages("str_replace", arguments, error, call_id=_call_id(turn))
        attempt[0]["loss"] = False  # context for the retry: SFT learns the recovery, not the slip (`agentrl.train.sft`)
        messages += attempt
        turn += 1
    if mistake != "no_edit":
        old, new = drill.wrong, drill.right
        result = edited(drill.path, rng.randint(2, 90))
        if mistake == "wrong_fix":
            new = drill.wrong_fix
        elif mistake == "miscopy":
            old, result = miscopy(rng, drill.wrong), not_found(drill.path)
        arguments = {"path": drill.path, "old_str": old, "new_str": new}
        messages += tool_call_messages("str_replace", arguments, result, call_id=_call_id(turn))
        turn += 1
    messages += tool_call_messages("submit", {}, SUBMITTED, call_id=_call_id(turn))
    return messages
