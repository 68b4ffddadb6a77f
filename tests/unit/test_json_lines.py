"""A JSON-lines file read as rows: the line numbers a user's editor shows, and the first bad line named."""

from __future__ import annotations

import pytest

from agentrl.errors import InputError
from agentrl.json_lines import read_json_lines

pytestmark = pytest.mark.unit


def test_rows_carry_the_number_of_their_line_and_blank_lines_are_skipped(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"a": 1}\n\n   \n{"b": 2}\n')
    assert read_json_lines(path) == [(1, {"a": 1}), (4, {"b": 2})]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"a": 1}\n\n{"a": \n', "rows.jsonl:3: not JSON (Expecting value)"),
        ('{"a": 1}\n[1, 2]\n', "rows.jsonl:2: a row must be a JSON object, not list"),
    ],
)
def test_the_first_bad_line_is_named_by_file_and_line(tmp_path, text, message):
    path = tmp_path / "rows.jsonl"
    path.write_text(text)
    with pytest.raises(InputError) as error:
        read_json_lines(path)
    assert str(error.value) == f"{path.parent}/{message}"


def test_a_file_that_is_not_utf8_names_the_byte(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b'{"a": "\xff"}\n')
    with pytest.raises(InputError, match=r"rows.jsonl: not UTF-8 text \(invalid start byte at byte 7\)"):
        read_json_lines(path)
