"""`Verdict`: the outcome of one check, and the table `agentrl doctor` prints."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Status = Literal["ok", "warn", "fail"]


@dataclass(frozen=True)
class Verdict:
    """One check's outcome: `fail` stops a run, `warn` says what to know, `ok` what was verified."""

    check: str
    status: Status
    detail: str
    fix: str = ""
    """What to do about a `warn` or `fail`."""


def failed(verdicts: Sequence[Verdict]) -> list[Verdict]:
    return [v for v in verdicts if v.status == "fail"]


def table(verdicts: Sequence[Verdict], *, width: int = 160) -> str:
    """The verdicts as a plain-text table: one row per check, the fix on its own line under a failure."""
    name_width = max((len(v.check) for v in verdicts), default=5)
    lines = [f"{'check':<{name_width}}  {'':4}  detail", f"{'-' * name_width}  ----  {'-' * 60}"]
    for v in verdicts:
        lines.append(f"{v.check:<{name_width}}  {v.status:4}  {_clip(v.detail, width)}")
        if v.fix and v.status != "ok":
            lines.append(f"{'':<{name_width}}        fix: {' '.join(v.fix.split())}")
    return "\n".join(lines)


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
