"""SWE drills over real code: each quotes a bug `injected_bugs` finds, whose fix is exactly the module's line, and
the demonstration edits that expression into the right one."""

import json
import random

import pytest

from agentrl.tiny.build import swe_code_drills as code_drills
from agentrl.tiny.build import swe_drills

pytestmark = pytest.mark.unit

MODULE = '''\
"""Durations."""


def duration_text(seconds):
    minutes = seconds // 60 % 60
    if seconds < 0 and minutes > 1:
        return None
    return f"{minutes}m"


class Log:
    def message(self, line):
        return line.split(" ", 2)[2].rstrip()
'''


@pytest.fixture
def root(tmp_path):
    (tmp_path / "clockwork").mkdir()
    (tmp_path / "clockwork" / "durations.py").write_text(MODULE)
    (tmp_path / "tests").mkdir()  # test directories are skipped
    (tmp_path / "tests" / "test_durations.py").write_text("def f(a, b):\n    return a - b\n")
    (tmp_path / "broken.py").write_text("def f(:\n")  # modules that do not parse are skipped
    # a held-out task's function (clock-1's): never drilled
    (tmp_path / "clockwork" / "held.py").write_text("def format_duration(seconds):\n    return seconds // 60 % 24\n")
    return tmp_path


def test_drills_quote_a_bug_of_a_module_line_and_its_fix_is_the_line(root):
    rng = random.Random(0)
    seen = set()
    for _ in range(60):
        drill = code_drills.draw(rng, root)
        seen.add(drill.right)
        assert drill.path == "clockwork/durations.py"
        assert drill.statement.startswith(f"In `{drill.path}`, `")
        assert drill.right in MODULE and MODULE.count(drill.right) >= 1
        buggy = MODULE.replace(drill.right, drill.wrong, 1)
        assert buggy.count(drill.wrong) == 1 and buggy != MODULE
        assert drill.wrong_fix not in (drill.wrong, drill.right)
    # forms the drill grammar lacks come through as they are written
    assert 'line.split(" ", 2)[2].rstrip()' in seen and "seconds // 60 % 60" in seen


def test_skipped_directories_and_unparsable_modules_give_no_drills(root):
    lines = code_drills.code_bugs(root)
    assert lines and {bug.path for line in lines for bug in line} == {"clockwork/durations.py"}


def test_a_demonstration_edits_the_drill_s_wrong_expression_into_the_right_one(root):
    drill = code_drills.draw(random.Random(3), root)
    messages = swe_drills.demonstration(random.Random(4), mistake_rate=0.0, drill=drill)
    assert drill.statement in messages[1]["content"]
    edit = [c["function"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or []][-2]
    arguments = json.loads(edit["arguments"]) if isinstance(edit["arguments"], str) else edit["arguments"]
    assert edit["name"] == "str_replace" and arguments["path"] == drill.path
    buggy = MODULE.replace(drill.right, drill.wrong, 1)
    assert buggy.replace(arguments["old_str"], arguments["new_str"]) == MODULE


def test_the_standard_library_is_the_default_root():
    assert (code_drills.stdlib_root() / "json" / "decoder.py").is_file()
