"""A JSON-lines file read as rows: each non-blank line one JSON object, and the first line that is not named as
`file:line` in an `InputError`, so a typo in line 4,127 of a task or conversation file is found without a search.

The task loader (`agentrl/tasks.py`) checks a file with it before `datasets` reads it, and names each row by its
line; the SFT warm-up (`agentrl/train/sft.py`) reads its conversations with it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentrl.errors import InputError


def read_json_lines(path: str | Path) -> list[tuple[int, dict[str, Any]]]:
    """Each object of a JSON-lines file with the number of its line (from 1); blank lines are skipped."""
    return parse_json_lines(read_utf8(path), path)


def parse_json_lines(text: str, path: str | Path) -> list[tuple[int, dict[str, Any]]]:
    """`read_json_lines` of a file's text already read; `path` names it in errors."""
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(f"{path}:{number}: not JSON ({e.msg})") from None
        if not isinstance(row, dict):
            raise InputError(f"{path}:{number}: a row must be a JSON object, not {type(row).__name__}")
        rows.append((number, row))
    return rows


def read_utf8(path: str | Path) -> str:
    """The file's text; an `InputError` naming the byte where it stops being UTF-8."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
