"""Generated easy terminal tasks: nine one-command templates filled with names, split by the names they use.

The hand-written easy tier (`easy.py`) has eight tasks, too few to tell whether a policy learned "run the
command the prompt spells out" or memorised eight answers. This family varies the names: training tasks draw
from `TRAIN_NAMES`, held-out tasks only from `TEST_NAMES`, so a held-out success means the policy copied a name
it was never trained on. `family(split)` is the bundled part (in `tasks.py`); `family(split, per_template=N)`
makes more of the same split without ever touching the held-out names. `made_up(count)` fills the templates with
made-up pronounceable names instead (`brimo`, `tarsek`): demonstrations over them teach a small policy to copy a
name from the prompt rather than to recall one of a few dozen.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from agentrl.scaffolds.demonstration import made_up_name
from agentrl.scaffolds.terminal.spec import TerminalTask

TRAIN_NAMES = (
    "alpha", "archive", "assets", "audit", "backup", "batch", "build", "cache", "chart", "config", "data", "debug",
    "deploy", "docs", "draft", "events", "export", "fixtures", "graphs", "images", "import", "inbox", "jobs",
    "journal", "keys", "labels", "ledger", "library", "logs", "media", "metrics", "models", "music", "notes",
    "orders", "output", "pages", "photos", "plans", "queue", "recipes", "records", "release", "sales", "samples",
    "scripts", "shared", "sketch", "source", "static", "summary", "tasks", "temp", "tickets", "tools", "travel",
    "uploads", "users", "videos", "work",
)  # fmt: skip
"""Names that training tasks use."""
TEST_NAMES = (
    "atlas", "bundle", "canvas", "digest", "garden", "harbor", "kernel", "lantern", "meadow", "orbit", "pixel",
    "quartz", "ribbon", "signal", "timber", "vector",
)  # fmt: skip
"""Names only held-out tasks use."""
WORDS = ("apples", "blue", "call", "check", "green", "lunch", "meet", "red", "ship", "soon", "today", "water")
"""Words of the lines tasks write (shared by both splits: the name is what a held-out task changes)."""
BUNDLED_PER_TEMPLATE = {"train": 12, "test": 3}
"""Tasks per template in the bundled family."""


Template = Callable[[random.Random, Callable[[], str]], tuple[str, str, str, dict[str, str], tuple[str, ...]]]
"""(rng, draw a fresh name) → (prompt, check, the one expert command, files, outputs)."""


def _mkdir(rng, name):
    d = name()
    check = f"expect(os.path.isdir({d!r}) and not os.path.islink({d!r}), '{d}/ is not a directory')"
    return f"Create a directory named {d} in the workspace (mkdir {d}).", check, f"mkdir {d}", {}, (d,)


def _touch(rng, name):
    f = f"{name()}.log"
    check = f"expect(os.path.isfile({f!r}) and text({f!r}) == '', '{f} is not an empty file')"
    return f"Create an empty file named {f} (touch {f}).", check, f"touch {f}", {}, (f,)


def _write(rng, name):
    f, line = f"{name()}.txt", f"{rng.choice(WORDS)} {rng.choice(WORDS)}"
    check = f"expect(lines({f!r}) == [{line!r}], '{f} does not hold the line {line}')"
    return (
        f"Create the file {f} containing the line {line} (echo '{line}' > {f}).",
        check,
        f"echo '{line}' > {f}",
        {},
        (f,),
    )


def _append(rng, name):
    f, line, first = f"{name()}.txt", f"{rng.choice(WORDS)} {rng.choice(WORDS)}", "first line"
    check = f"expect(lines({f!r}) == [{first!r}, {line!r}], '{f} is not the first line then {line}')"
    prompt = f"Append the line {line} to the end of {f} (echo '{line}' >> {f})."
    return prompt, check, f"echo '{line}' >> {f}", {f: first + "\n"}, (f,)


def _copy(rng, name):
    f, d, body = f"{name()}.txt", name(), f"{rng.choice(WORDS)}\n"
    check = (
        f"expect(text('{d}/{f}') == {body!r}, '{d}/{f} differs from {f}')\n"
        f"expect(text({f!r}) == {body!r}, '{f} changed')"
    )
    command = f"mkdir -p {d} && cp {f} {d}/"
    return f"Copy {f} to {d}/{f} ({command}).", check, command, {f: body}, (f"{d}/{f}",)


def _rename(rng, name):
    a, b, body = f"{name()}.md", f"{name()}.md", f"# {rng.choice(WORDS)}\n"
    check = f"expect(text({b!r}) == {body!r}, '{b} does not hold {a}')\n"
    check += f"expect(not os.path.exists({a!r}), '{a} still exists')"
    return f"Rename {a} to {b} (mv {a} {b}).", check, f"mv {a} {b}", {a: body}, (b,)


def _delete(rng, name):
    d, keep = name(), f"{name()}.txt"
    check = (
        f"expect(not os.path.exists({d!r}), '{d} still exists')\nexpect(text({keep!r}) == 'keep\\n', '{keep} changed')"
    )
    files = {f"{d}/a.tmp": "a\n", f"{d}/sub/b.tmp": "b\n", keep: "keep\n"}
    return f"Delete the directory {d} and everything in it (rm -r {d}).", check, f"rm -r {d}", files, (keep,)


def _chmod(rng, name):
    s = f"{name()}.sh"
    check = (
        f"expect(os.path.isfile({s!r}) and os.access({s!r}, os.X_OK), '{s} is not executable')\n"
        f"expect(run(['./{s}']) == 'ok\\n', '{s} no longer prints ok')"
    )
    return f"Make the script {s} executable (chmod +x {s}).", check, f"chmod +x {s}", {s: "#!/bin/sh\necho ok\n"}, (s,)


def _count(rng, name):
    f, g, n = f"{name()}.txt", f"{name()}.txt", rng.randint(3, 60)
    check = f"expect(text({g!r}).strip() == '{n}', '{g} does not hold {n}')"
    command = f"wc -l < {f} > {g}"
    files = {f: "".join(f"{rng.choice(WORDS)}\n" for _ in range(n))}
    return f"Write the number of lines of {f} into {g} ({command}).", check, command, files, (g,)


TEMPLATES: dict[str, Template] = {
    "mkdir": _mkdir,
    "touch": _touch,
    "write": _write,
    "append": _append,
    "copy": _copy,
    "rename": _rename,
    "delete": _delete,
    "chmod": _chmod,
    "count": _count,
}


def family(split: str, *, per_template: int | None = None, seed: int = 0) -> list[TerminalTask]:
    """`per_template` generated easy tasks per template (default: the bundled number) from `split`'s names.

    The same arguments give the same tasks; the first `BUNDLED_PER_TEMPLATE[split]` of every template are the
    bundled ones whatever `per_template` is, so more tasks only ever add to them.
    """
    names = {"train": TRAIN_NAMES, "test": TEST_NAMES}[split]
    count = BUNDLED_PER_TEMPLATE[split] if per_template is None else per_template
    out = []
    for kind, template in TEMPLATES.items():
        rng = random.Random(f"{seed}/{split}/{kind}")
        for i in range(count):
            name = _Names(rng, names)
            prompt, check, command, files, outputs = template(rng, name)
            slug = f"{kind}-{'-'.join(name.drawn)}-{i}"
            out.append(TerminalTask(slug, "easy", prompt, check, (command,), files, "", outputs, split, name.drawn))
    return out


def miscopy(rng: random.Random, name: str) -> str:
    """`name` with one letter dropped, doubled or changed: the slip a copying policy makes."""
    k = rng.randrange(len(name))
    slip = rng.choice(("drop", "double", "change"))
    if slip == "drop" and len(name) > 1:
        return name[:k] + name[k + 1 :]
    if slip == "double":
        return name[:k] + name[k] + name[k:]
    return name[:k] + rng.choice([c for c in "aeioulnrst" if c != name[k]]) + name[k + 1 :]


def made_up(count: int, *, seed: int = 0) -> list[TerminalTask]:
    """`count` training tasks, the templates in turn, over made-up names (`made_up_name`)."""
    rng = random.Random(f"{seed}/made-up")
    kinds = list(TEMPLATES.items())
    out = []
    for i in range(count):
        kind, template = kinds[i % len(kinds)]
        name = _MadeUpNames(rng)
        prompt, check, command, files, outputs = template(rng, name)
        slug = f"{kind}-{'-'.join(name.drawn)}-{i}"
        out.append(TerminalTask(slug, "easy", prompt, check, (command,), files, "", outputs, "train", name.drawn))
    return out


class _Names:
    """Draws names for one task, distinct within it, so `mv a.md b.md` never renames a file onto itself."""

    def __init__(self, rng: random.Random, pool: tuple[str, ...]) -> None:
        self.rng, self.pool, self.drawn = rng, pool, ()

    def __call__(self) -> str:
        choice = self.rng.choice([n for n in self.pool if n not in self.drawn])
        self.drawn += (choice,)
        return choice


class _MadeUpNames(_Names):
    def __init__(self, rng: random.Random) -> None:
        super().__init__(rng, ())

    def __call__(self) -> str:
        while (name := made_up_name(self.rng)) in self.drawn or name in TEST_NAMES:
            pass
        self.drawn += (name,)
        return name
