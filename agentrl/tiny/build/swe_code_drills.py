"""SWE drills over real code: one-token bugs (`injected_bugs`) in Python modules on disk, the standard library by
default, as easy-tier drills.

The drill generator (`swe_drills`, `swe_expressions`) writes its expressions from a small grammar, and a policy
trained on them alone copies held-out expressions back into that grammar: `line.split(" ", 2)[2]` comes out as
`line.split(" ")[2]` and `weight_kg / height_m**2` garbled, because `split` never had a second argument there and
`**` never appeared. Real modules have every form Python code has. A drill here is a bug `injected_bugs` finds in
one of them, quoted the way the easy tier quotes it (path relative to the root, `Class.method`, both expressions),
and demonstrated by `swe_drills.demonstration`. No file or function named by a held-out task is used.
"""

from __future__ import annotations

import functools
import random
import sysconfig
from pathlib import Path

from agentrl.scaffolds.swe import injected_bugs
from agentrl.scaffolds.swe.injected_bugs import Bug
from agentrl.tiny.build.swe_drills import Drill, held_out_names

SKIPPED_DIRS = frozenset({"test", "tests", "site-packages", "dist-packages", "idlelib", "__pycache__"})
MAX_MODULE_BYTES = 200_000


def stdlib_root() -> Path:
    """The running interpreter's standard library: on every machine that runs Python, nothing to download."""
    return Path(sysconfig.get_paths()["stdlib"])


@functools.cache
def code_bugs(root: Path | None = None) -> tuple[tuple[Bug, ...], ...]:
    """Per line with at least two usable bugs, its bugs (the second is the drills' wrong fix), in file order: a
    bug's quoted wrong expression occurs once in its buggy module, and neither path nor function is a held-out
    task's."""
    root = root or stdlib_root()
    excluded = held_out_names()
    lines: list[tuple[Bug, ...]] = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        if SKIPPED_DIRS.intersection(relative.parts[:-1]) or path.stat().st_size > MAX_MODULE_BYTES:
            continue
        try:
            source = path.read_text(encoding="utf-8")
            found = injected_bugs.sites(relative.as_posix(), source)
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        text = source.splitlines()
        for site in found:
            # a backtick on the line could end up inside a quoted expression, which the statement's quoting forbids
            if site.path in excluded or site.function in excluded or "`" in text[site.line_no - 1]:
                continue
            usable = tuple(injected_bugs.unique_bugs(site, source))
            if len(usable) >= 2:
                lines.append(usable)
    return tuple(lines)


def draw(rng: random.Random, root: Path | None = None) -> Drill:
    """A random real-code drill: one bug of a random line, another bug of the same line as its wrong fix."""
    bug, other = rng.sample(rng.choice(code_bugs(root)), 2)
    return Drill(
        statement=bug.statement,
        path=bug.path,
        wrong=injected_bugs.quoted_wrong(bug),
        right=injected_bugs.quoted_right(bug),
        wrong_fix=injected_bugs.quoted_wrong(other),
    )
