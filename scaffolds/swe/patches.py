"""Unified diffs as the SWE tasks use them: checking that one parses, and the SWE-RL similarity of two."""

from __future__ import annotations

import difflib
import re

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def parses(patch: str) -> bool:
    """Whether `patch` is a well-formed unified diff: at least one file section, every hunk's line counts match
    its header. (Whether it applies is for `git apply` to say.)"""
    lines = patch.splitlines()
    files = hunks = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            files += 1
            i += 2
            continue
        match = _HUNK.match(line)
        if match:
            if not files:
                return False
            old, new = (int(n) if n is not None else 1 for n in match.group(2, 4))
            i += 1
            while (old > 0 or new > 0) and i < len(lines):
                body = lines[i]
                if body.startswith("\\"):
                    i += 1
                    continue
                tag = body[:1] or " "
                if tag == " ":
                    old, new = old - 1, new - 1
                elif tag == "-":
                    old -= 1
                elif tag == "+":
                    new -= 1
                else:
                    return False
                i += 1
            if old != 0 or new != 0:
                return False
            hunks += 1
            continue
        i += 1
    return files > 0 and hunks > 0


def changed_lines(patch: str) -> int:
    """Added plus removed lines."""
    return sum(1 for line in patch.splitlines() if line[:1] in "+-" and not line.startswith(("+++ ", "--- ")))


def similarity(model_patch: str, gold_patch: str) -> float:
    """SWE-RL's reward (arXiv 2502.18449): `difflib.SequenceMatcher` ratio of the model patch to the gold patch,
    −1 when the model patch does not parse. Deviation: the paper compares the edited files' text after
    applying search/replace edits; here the two unified diffs are compared directly, with git's `index` lines
    (blob hashes, which differ for any different result) removed. An empty patch is no edit: 0."""
    if not model_patch.strip():
        return 0.0
    if not parses(model_patch):
        return -1.0
    return difflib.SequenceMatcher(None, _normalised(model_patch), _normalised(gold_patch), autojunk=False).ratio()


def _normalised(patch: str) -> str:
    return "\n".join(line for line in patch.splitlines() if not line.startswith("index "))
