"""`TrajectoryFile`: one `trajectories/*step_*.jsonl` file, indexed by byte offset so that any line reads alone.

A run writes thousands of trajectories a step, each line holding every token id, so nothing here holds a file
in memory: the index keeps, per line, its offset, its length and a summary read from the line's head (the fields
before `"messages"`, which `write_trajectories` puts first) plus a few counts taken from the raw bytes (turns,
tool results, tool errors, parse errors). A file that grows (a run writing it) is indexed on from where the last
look stopped; one that was replaced or rewritten (a resumed run rewrites its last steps) is indexed again: the
bytes that ended the last look must still be where they were. An unfinished last
line, without its newline yet, waits for the next look.

Text search runs over the raw bytes of each line with its lists of numbers (token ids, log-probs, entropies)
left out: JSON escapes the text the same way for the line and for the query, so a substring of the escaped query
is a substring of the text (the conversation, tool calls and results, parse errors, reasoning, answer, error).
"""

from __future__ import annotations

import json
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HEAD_END = b', "messages": '
NUMBER_LISTS = re.compile(rb"\[[-0-9., eE]*\]")
SUMMARY_TEXT_CHARS = 160
"""How much of an answer or an error a summary keeps (the trajectory itself has all of it)."""


@dataclass(frozen=True)
class Entry:
    """One line of the file: where it is and what the lists show of it."""

    offset: int
    length: int
    summary: dict[str, Any]


class TrajectoryFile:
    """The index of one trajectory file; `refresh()` brings it up to date with the file on disk."""

    def __init__(self, path: Path, *, default_scaffold: str | None = None) -> None:
        self.path = path
        self.default_scaffold = default_scaffold
        """The scaffold of lines that name none."""
        self.entries: list[Entry] = []
        self._indexed_bytes = 0
        self._identity: tuple[int, int] | None = None
        self._last_bytes = b""
        self._lock = threading.Lock()

    def refresh(self) -> list[Entry]:
        """Index what was appended since the last look (all of it again if the file was replaced)."""
        with self._lock:
            stat = os.stat(self.path)
            identity = (stat.st_ino, stat.st_dev)
            if identity != self._identity or stat.st_size < self._indexed_bytes or not self._unchanged():
                self.entries, self._indexed_bytes, self._identity, self._last_bytes = [], 0, identity, b""
            if stat.st_size > self._indexed_bytes:
                self._index_from(self._indexed_bytes)
            return self.entries

    def read(self, index: int) -> dict[str, Any]:
        """The whole record of line `index`."""
        entry = self.entries[index]
        with self.path.open("rb") as f:
            f.seek(entry.offset)
            return json.loads(f.read(entry.length))

    def matching(self, indices: list[int], query: str) -> list[int]:
        """Those of `indices` whose text contains `query`, ignoring ASCII case (see the module docstring)."""
        needle = json.dumps(query)[1:-1].lower().encode()
        found = []
        with self.path.open("rb") as f:
            for i in indices:
                entry = self.entries[i]
                f.seek(entry.offset)
                line = f.read(entry.length).lower()
                if needle in line and needle in NUMBER_LISTS.sub(b"", line):
                    found.append(i)
        return found

    def _unchanged(self) -> bool:
        """Whether the bytes that ended the last look are still there (else the file was rewritten)."""
        if not self._last_bytes:
            return True
        with self.path.open("rb") as f:
            f.seek(self._indexed_bytes - len(self._last_bytes))
            return f.read(len(self._last_bytes)) == self._last_bytes

    def _index_from(self, offset: int) -> None:
        with self.path.open("rb") as f:
            f.seek(offset)
            while True:
                line = f.readline()
                if not line.endswith(b"\n"):  # end of file, or a line still being written
                    break
                if line.strip():
                    summary = summarize(line, len(self.entries))
                    summary["scaffold"] = summary.get("scaffold") or self.default_scaffold
                    self.entries.append(Entry(offset, len(line), summary))
                offset += len(line)
                self._last_bytes = line[-64:]
        self._indexed_bytes = offset


def summarize(line: bytes, index: int) -> dict[str, Any]:
    """What the lists show of a trajectory, from its line's head and byte counts (the line is never decoded
    whole unless its head is not where `write_trajectories` puts it)."""
    cut = line.find(HEAD_END)
    try:
        head = json.loads(line[:cut] + b"}") if cut > 0 else json.loads(line)
    except ValueError:
        return {"index": index, "unreadable": True, "trajectory_id": f"line {index + 1}"}
    return {
        "index": index,
        "trajectory_id": head.get("trajectory_id"),
        "group_id": head.get("group_id"),
        "task_id": head.get("task_id"),
        "scaffold": head.get("scaffold"),
        "parent_id": head.get("parent_id"),
        "branch_turn": head.get("branch_turn"),
        "policy_version": head.get("policy_version"),
        "stop_reason": head.get("stop_reason"),
        "reward": head.get("reward"),
        "reward_components": head.get("reward_components") or {},
        "answer": _clip(head.get("answer")),
        "error": _clip(head.get("error")),
        "turns": line.count(b'"completion_ids": '),
        "tool_calls": line.count(b'"call_id": '),
        "tool_errors": line.count(b'"is_error": true'),
        "parse_errors": line.count(b'"parse_error": "'),
        "bytes": len(line),
    }


def _clip(text: Any) -> Any:
    if isinstance(text, str) and len(text) > SUMMARY_TEXT_CHARS:
        return text[:SUMMARY_TEXT_CHARS] + "…"
    return text
