"""The synthetic easy-tier drills of the GUI and SWE scaffolds: real episode format, correct and deliberately
wrong demonstrations, no bundled held-out task, and sizes that suit the tiny policy."""

import json
import random
import re
from pathlib import Path

import pytest
from agentrl.scaffolds.gui import tasks as gui_tasks
from agentrl.scaffolds.gui.expert import element_id
from agentrl.scaffolds.swe import bundled
from agentrl.scaffolds.swe.scaffold import SYSTEM_PROMPT as SWE_SYSTEM_PROMPT
from agentrl.tools.files import FileEditor

from agentrl.errors import ToolError
from agentrl.tiny.build import gui_drills, gui_pages, swe_drills
from agentrl.tiny.build import swe_expressions as drill_expressions
from agentrl.tiny.tokenizer import render

pytestmark = pytest.mark.unit

N = 400
GOAL = re.compile(r"^Click the (\S+) labelled '([^']*)'\.$")
ELEMENT = re.compile(r'^\[(\d+)\] (\S+) ("(?:[^"\\]|\\.)*")', re.MULTILINE)
SPAN = re.compile(r"`([^`]*)`")

LOGIN_PAGE = (
    "url: http://127.0.0.1:40331/login\ntitle: Sign in\n# Sign in\n"
    '[1] textbox "Username" value=""\n[2] password "Password" value=""\n[3] checkbox "Remember me" unchecked\n'
    '[4] button "Sign in"\n[5] link "Forgot password?"'
)
"""The bundled login page as the browser tool showed it in a real episode."""
TODO_PAGE_CHARS = 584
"""Characters of the longest bundled start page's outline (the todo list with its four items)."""
MAX_GUI_RENDERED = 1800
"""A real easy episode on the todo list renders to about 1,600 characters (its outline twice)."""
MAX_SWE_RENDERED = 2200
"""The captured real easy SWE episode (run_tests, an edit with context lines, submit) renders to about 2,070."""


def drills(module, seed: int, mistake_rate: float, n: int = N) -> list[list[dict]]:
    rng = random.Random(seed)
    return [module.demonstration(rng, mistake_rate=mistake_rate) for _ in range(n)]


def check_calls(messages: list[dict]) -> list[tuple[str, dict, str]]:
    """(tool name, arguments, result) of each call, after checking that the turns alternate as in a real episode:
    each assistant turn with a call is answered by one tool message with its id, numbered `call_<turn>_0`."""
    calls = []
    k = 2
    turn = 0
    while k < len(messages):
        assistant = messages[k]
        assert assistant["role"] == "assistant" and isinstance(assistant["content"], str)
        if not assistant.get("tool_calls"):
            assert k == len(messages) - 1
            break
        (call,) = assistant["tool_calls"]
        assert call["type"] == "function" and call["id"] == f"call_{turn}_0"
        assert isinstance(call["function"]["arguments"], dict)
        reply = messages[k + 1]
        assert reply == {
            "role": "tool",
            "tool_call_id": call["id"],
            "name": call["function"]["name"],
            "content": reply["content"],
        }
        calls.append((call["function"]["name"], call["function"]["arguments"], reply["content"]))
        k += 2
        turn += 1
    return calls


# --- GUI --------------------------------------------------------------------------------------------------------


def gui_parts(messages: list[dict]) -> tuple[str, str, str]:
    """(role, name) the goal names, and the start page's outline."""
    assert messages[0] == {"role": "system", "content": gui_tasks.SYSTEM_PROMPT}
    assert messages[1]["role"] == "user"
    goal, page = messages[1]["content"].split("\n\n", 1)
    role, name = GOAL.match(goal).groups()
    return role, name, page


def check_outline(text: str) -> list[tuple[str, str]]:
    lines = text.split("\n")
    assert re.fullmatch(r"url: http://127\.0\.0\.1:\d{5}/[a-z0-9/-]+(\?[a-z]+=1)?", lines[0]), lines[0]
    assert re.fullmatch(r"title: \S.*", lines[1]) and lines[2].startswith("# ")
    found = [m.groups() for m in ELEMENT.finditer(text)]
    assert [int(n) for n, _, _ in found] == list(range(1, len(found) + 1))
    assert all(role in ("textbox", "password", "checkbox", "combobox", "button", "link") for _, role, _ in found)
    return [(role, name) for _, role, name in found]


def gui_is_mistake(messages: list[dict]) -> bool:
    role, name, page = gui_parts(messages)
    calls = check_calls(messages)
    return not calls or calls[0][1] != {"label": name}


def test_gui_outline_format_is_the_browser_tool_s():
    E = gui_pages.Element
    page = gui_pages.Page(
        "/login",
        "Sign in",
        (
            gui_pages.Text("# Sign in"),
            E("textbox", "Username", ' value=""'),
            E("password", "Password", ' value=""'),
            E("checkbox", "Remember me", " unchecked"),
            E("button", "Sign in"),
            E("link", "Forgot password?"),
        ),
    )
    assert gui_pages.outline(page, 40331) == LOGIN_PAGE


def test_gui_drills_are_well_formed_and_correct_without_mistakes():
    for messages in drills(gui_drills, 0, 0.0):
        role, name, page = gui_parts(messages)
        elements = check_outline(page)
        assert 3 <= len(elements) <= 12
        assert role in ("button", "link", "checkbox")
        (call,) = check_calls(messages)
        assert len(messages) == 5 and messages[-1] == {"role": "assistant", "content": "done"}
        tool, arguments, result = call
        assert tool == "click" and arguments == {"label": name}
        # the label names one element of the page, so a click by label reaches it
        assert [json.loads(n).casefold() for _, n in elements].count(name.casefold()) == 1
        assert element_id(page, role, name)
        check_outline(result)
        # the port stays; a checkbox toggles in place
        assert result.split("/")[2] == page.split("/")[2]
        if role == "checkbox":
            assert result.count(" checked") != page.count(" checked")


def test_gui_mistakes_follow_the_rate():
    assert not any(gui_is_mistake(m) for m in drills(gui_drills, 1, 0.0))
    wrong = drills(gui_drills, 2, 1.0)
    assert all(gui_is_mistake(m) for m in wrong)
    assert any(len(m) == 3 for m in wrong) and any(len(m) == 5 for m in wrong)
    for messages in wrong:
        calls = check_calls(messages)
        assert messages[-1] == {"role": "assistant", "content": "done"}
        if calls:
            check_outline(calls[0][2])
    share = sum(gui_is_mistake(m) for m in drills(gui_drills, 3, 0.3, 1000)) / 1000
    assert 0.24 < share < 0.36


def test_gui_drills_never_show_a_held_out_easy_task():
    held_out = [t for t in gui_tasks.tasks("test") if t.metadata["tier"] == "easy"]
    assert held_out
    goals = {t.prompt for t in held_out}
    targets = {tuple(step[1:3]) for t in held_out for step in t.metadata["steps"]}
    assert targets == gui_pages.held_out_targets()
    for messages in drills(gui_drills, 4, 0.3, 2000):
        assert messages[1]["content"].split("\n\n", 1)[0] not in goals
        for message in messages[1:]:
            if message["role"] in ("user", "tool"):
                shown = {(r, n.strip('"')) for _, r, n in ELEMENT.findall(message["content"])}
                assert not shown & targets


def test_gui_drills_vary_and_are_deterministic():
    first, again = drills(gui_drills, 5, 0.3), drills(gui_drills, 5, 0.3)
    assert first == again
    names = {gui_parts(m)[1] for m in first}
    assert len(names) > 0.8 * len(first)
    assert len({len(check_outline(gui_parts(m)[2])) for m in first}) == 10


def test_gui_drills_are_about_as_long_as_real_pages():
    outlines = []
    for messages in drills(gui_drills, 6, 0.3):
        outlines.append(len(gui_parts(messages)[2]))
        assert len(render(messages, [])) < MAX_GUI_RENDERED
    assert max(outlines) <= gui_drills.MAX_OUTLINE_CHARS < 2 * TODO_PAGE_CHARS
    assert 200 < sorted(outlines)[len(outlines) // 2] < TODO_PAGE_CHARS


# --- SWE --------------------------------------------------------------------------------------------------------


def swe_parts(messages: list[dict]) -> tuple[str, str, str, str]:
    """(path, function, wrong, right) the issue states."""
    assert messages[0] == {"role": "system", "content": SWE_SYSTEM_PROMPT}
    match = re.fullmatch(
        r"<issue>\n(.*)\n</issue>\n\nThe repository is at /workspace\. Fix the issue\.",
        messages[1]["content"],
        re.DOTALL,
    )
    statement = match.group(1)
    spans = SPAN.findall(statement)
    assert len(spans) == 4 and statement.startswith(f"In `{spans[0]}`, `{spans[1]}` ")
    assert re.fullmatch(r"[a-z_/]+\.py", spans[0]) and re.fullmatch(r"([A-Z][a-z]+\.)?[a-z_]+", spans[1])
    assert spans[2] != spans[3]
    return tuple(spans)


def swe_calls(messages: list[dict]) -> list[tuple[str, dict, str]]:
    calls = check_calls(messages)
    assert messages[-1]["role"] == "tool"
    assert calls[-1] == ("submit", {}, swe_drills.SUBMITTED)
    edits = [["str_replace"], ["str_replace", "str_replace"]]
    assert [c[0] for c in calls[:-1]] in ([], ["run_tests"], *edits, *(["run_tests", *e] for e in edits))
    for name, arguments, result in calls:
        if name == "run_tests":
            assert arguments == {}
            assert re.fullmatch(r"\.+ +\[100%\]\n(\d) passed in 0\.\d\ds\n\[pytest exit code 0\]", result)
    return calls


def swe_is_mistake(messages: list[dict]) -> bool:
    path, _, wrong, right = swe_parts(messages)
    edits = [(args, result) for name, args, result in swe_calls(messages) if name == "str_replace"]
    if not edits:
        return True
    ((arguments, result),) = edits
    assert arguments["path"] == path
    if arguments["old_str"] != wrong:
        assert arguments["old_str"] not in wrong and result == swe_drills.not_found(path)
        return True
    assert re.fullmatch(rf"edited {re.escape(path)}: replaced lines (\d+)-\1", result)
    return arguments["new_str"] != right


def test_swe_drills_are_well_formed_and_correct_without_mistakes():
    runs = 0
    for messages in drills(swe_drills, 0, 0.0):
        path, _, wrong, right = swe_parts(messages)
        calls = swe_calls(messages)
        edit = calls[-2]
        assert edit[0] == "str_replace" and edit[1] == {"path": path, "old_str": wrong, "new_str": right}
        runs += calls[0][0] == "run_tests"
    assert 0.2 < runs / N < 0.4


def test_swe_mistakes_follow_the_rate():
    assert not any(swe_is_mistake(m) for m in drills(swe_drills, 1, 0.0))
    wrong = drills(swe_drills, 2, 1.0)
    assert all(swe_is_mistake(m) for m in wrong)
    kinds = {len([c for c in swe_calls(m) if c[0] == "str_replace"]) for m in wrong}
    assert kinds == {0, 1}
    assert any("does not occur" in m[-3]["content"] for m in wrong)
    share = sum(swe_is_mistake(m) for m in drills(swe_drills, 3, 0.3, 1000)) / 1000
    assert 0.24 < share < 0.36


async def test_swe_tool_replies_are_the_real_tools_text(tmp_path: Path):
    class Workspace:
        workspace = str(tmp_path)

        async def read_file(self, path: str, max_bytes: int) -> str:
            return Path(path).read_text()

        async def write_file(self, path: str, content: str) -> None:
            Path(path).write_text(content)

    editor = FileEditor(Workspace())
    for messages in drills(swe_drills, 7, 0.5, 60):
        path, _, wrong, _ = swe_parts(messages)
        for name, arguments, result in swe_calls(messages):
            if name != "str_replace":
                continue
            line = int(result.rsplit(" ", 1)[1].split("-")[0]) if result.startswith("edited") else 3
            (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / path).write_text("\n" * (line - 1) + f"    {wrong}\n    return None\n")
            real = await editor.str_replace.call(arguments)
            assert real.text == result
    import agentrl.tools.swe.swe_tools

    source = Path(agentrl.tools.swe.swe_tools.__file__).read_text()
    assert swe_drills.SUBMITTED in source


def test_swe_drills_never_state_a_bundled_task():
    statements = {i.problem_statement.strip() for i in bundled.instances()}
    held_out = {
        name
        for i in bundled.instances()
        if i.tier == "easy" and i.split == "test"
        for name in SPAN.findall(i.problem_statement)[:2]
    }
    assert held_out
    for messages in drills(swe_drills, 4, 0.3, 2000):
        path, function, _, _ = swe_parts(messages)
        assert messages[1]["content"].split("\n")[1] not in statements
        assert path not in held_out and function not in held_out


def test_swe_drills_vary_and_are_deterministic():
    first, again = drills(swe_drills, 5, 0.3), drills(swe_drills, 5, 0.3)
    assert first == again
    parts = [swe_parts(m) for m in first]
    assert len({p[2] for p in parts}) > 0.9 * len(parts)
    expressions = " ".join(p[2] + p[3] for p in parts)
    for piece in ('"', "'", "(", "[", ".", " + ", " < ", "self."):
        assert piece in expressions
    assert len({p[0] for p in parts}) > 0.5 * len(parts)


def test_swe_drills_with_made_up_operands_copy_rather_than_recall():
    rng = random.Random(9)
    assert [swe_drills.demonstration(rng, mistake_rate=0.3, made_up_operands=0.0) for _ in range(N)] == drills(
        swe_drills, 9, 0.3
    ), "without made-up operands the drill stream is unchanged"
    rng = random.Random(10)
    made_up = [swe_drills.demonstration(rng, mistake_rate=0.0, made_up_operands=0.5) for _ in range(N)]

    def identifiers(batch: list[list[dict]]) -> set[str]:
        return {name for m in batch for name in re.findall(r"[A-Za-z_]\w*", swe_parts(m)[2])}

    assert len(identifiers(made_up)) > 2 * len(identifiers(drills(swe_drills, 10, 0.0)))
    constants = {int(n) for m in made_up for n in re.findall(r"\b\d+\b", swe_parts(m)[2])}
    assert constants - set(drill_expressions.INTS)
    for messages in made_up:
        path, _, wrong, right = swe_parts(messages)
        assert swe_calls(messages)[-2][1] == {"path": path, "old_str": wrong, "new_str": right}


async def test_swe_drills_that_retry_get_the_real_errors_and_then_fix_it(tmp_path: Path):
    rng = random.Random(11)
    assert [swe_drills.demonstration(rng, mistake_rate=0.3, retry_rate=0.0) for _ in range(N)] == drills(
        swe_drills, 11, 0.3
    ), "without retries the drill stream is unchanged"

    class Workspace:
        workspace = "/workspace"

        async def read_file(self, path: str, max_bytes: int) -> str:
            if not (tmp_path / path[len("/workspace/") :]).is_file():  # as the sandbox worker reports it
                raise ToolError(f"No such file or directory: {path}")
            return (tmp_path / path[len("/workspace/") :]).read_text()

        async def write_file(self, path: str, content: str) -> None:
            (tmp_path / path[len("/workspace/") :]).write_text(content)

    editor = FileEditor(Workspace())
    rng = random.Random(12)
    slips = set()
    for _ in range(200):
        messages = swe_drills.demonstration(rng, mistake_rate=0.0, made_up_operands=0.5, retry_rate=1.0)
        path, _, wrong, right = swe_parts(messages)
        first, second = [(a, r) for name, a, r in swe_calls(messages) if name == "str_replace"]
        assert second[0] == {"path": path, "old_str": wrong, "new_str": right}
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        line = int(second[1].rsplit(" ", 1)[1].split("-")[0])
        (tmp_path / path).write_text("\n" * (line - 1) + f"    {wrong}\n")
        real = await editor.str_replace.call(first[0])
        assert real.is_error and real.text == first[1]
        slips.add(first[1].split(" ")[0])
        assert (await editor.str_replace.call(second[0])).text == second[1]
    assert slips == {"old_str", "No", "bad"}
    share = sum(
        len([c for c in swe_calls(m) if c[0] == "str_replace"]) == 2
        for m in (swe_drills.demonstration(rng, mistake_rate=0.3, retry_rate=0.5) for _ in range(1000))
    )
    assert 0.3 < share / 1000 < 0.4  # half of the 70% that are correct


def test_swe_drills_are_about_as_long_as_real_episodes():
    for messages in drills(swe_drills, 6, 0.3):
        assert len(render(messages, [])) < MAX_SWE_RENDERED
        _, _, wrong, right = swe_parts(messages)
        assert max(len(wrong), len(right)) <= swe_drills.MAX_EXPRESSION_CHARS
