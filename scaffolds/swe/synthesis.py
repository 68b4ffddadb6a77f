"""More training tasks from the repositories a task set already has: bugs injected into their fixed code.

Twelve easy training tasks teach a policy those twelve statements; what should carry to held-out repositories is
the skill (find the quoted expression, replace it by the other one, submit). So, as SWE-smith does
(arXiv 2504.21798), each training task's repository is taken at its fixed state (`base_commit` with the gold
`patch`), one-token bugs are injected into it (`injected_bugs`), and a bug becomes a task only when the tests
say so: in the grading sandbox, with the source task's `test_patch`, at least one of its FAIL_TO_PASS and
PASS_TO_PASS tests fails with the bug in place (those become the new FAIL_TO_PASS; the rest PASS_TO_PASS), and
all pass with the new gold patch, which is the bug undone. A bug the tests do not catch is dropped, as is one
whose quoted expression occurs more than once in its file (a `str_replace` of it would be ambiguous).

Only `train` tasks are sources; `test` tasks are copied through unchanged with their repositories, so the written
set trains on the synthesized (and, by default, the source) tasks and evaluates on the same held-out tasks as
before. Every new task's repository is a git repository of its own under `<out>/repos`, built deterministically
like the bundled ones. Nothing is downloaded.
"""

from __future__ import annotations

import asyncio
import dataclasses
import difflib
import io
import json
import random
import shutil
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path

from agentrl.scaffolds.swe import injected_bugs
from agentrl.scaffolds.swe.grading import grade_many
from agentrl.scaffolds.swe.injected_bugs import Bug
from agentrl.scaffolds.swe.instances import SweInstance, repository_archive
from agentrl.scaffolds.swe.repo_build import build_repository, git

PROBE_PATCH = """\
diff --git a/.agentrl-probe b/.agentrl-probe
new file mode 100644
--- /dev/null
+++ b/.agentrl-probe
@@ -0,0 +1 @@
+probe
"""
"""A patch that changes no code: grading it reports each test's outcome on the unpatched repository."""


@dataclasses.dataclass(frozen=True)
class SynthesisReport:
    """What `synthesize` wrote."""

    tasks_file: Path
    repos_dir: Path
    synthesized: dict[str, int]
    """Source instance id → tasks made from it."""
    candidates: int
    """Bugs tried (graded)."""
    copied: int
    """Source tasks written through unchanged (held-out ones, and the training ones with `keep_sources`)."""


def synthesize(
    instances: Sequence[SweInstance],
    repos_dir: str | Path,
    out: str | Path,
    *,
    per_task: int = 8,
    seed: int = 0,
    keep_sources: bool = True,
    concurrency: int = 2,
) -> SynthesisReport:
    """Write `<out>/tasks.jsonl` and `<out>/repos/`: up to `per_task` bugs per training instance, plus the
    source instances (see the module docstring)."""
    out = Path(out)
    (out / "repos").mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    records: list[dict] = []
    made: dict[str, int] = {}
    tried = copied = 0
    for source in instances:
        if source.split == "train":
            kept, graded = asyncio.run(_from_source(source, repos_dir, out / "repos", per_task, rng, concurrency))
            made[source.instance_id] = len(kept)
            tried += graded
            records += [k.to_record() for k in kept]
        if source.split != "train" or keep_sources:
            copy_repository(source, Path(repos_dir), out / "repos")
            records.append(source.to_record())
            copied += 1
    tasks_file = out / "tasks.jsonl"
    tasks_file.write_text("".join(json.dumps(r) + "\n" for r in records))
    return SynthesisReport(tasks_file, out / "repos", made, tried, copied)


async def _from_source(
    source: SweInstance, repos_dir: str | Path, out_repos: Path, per_task: int, rng: random.Random, concurrency: int
) -> tuple[list[SweInstance], int]:
    """The tasks made from one source instance, and how many bugs were graded to find them."""
    tests = (*source.fail_to_pass, *source.pass_to_pass)
    repos = str(out_repos)
    kept: list[SweInstance] = []
    graded = 0
    batch_size = max(per_task, concurrency)
    with tempfile.TemporaryDirectory(prefix="agentrl-swe-synth-") as scratch:
        tree = Path(scratch) / "tree"
        fixed_tree(source, repos_dir, tree)
        bugs = candidate_bugs(tree)
        rng.shuffle(bugs)
        # Grade in batches and stop once `per_task` are kept: most bugs are caught, so few batches run, and only
        # their repositories are built.
        for start in range(0, len(bugs), batch_size):
            if len(kept) >= per_task:
                break
            numbered = enumerate(bugs[start : start + batch_size], start)
            batch = [_candidate(source, bug, k, tree, out_repos) for k, bug in numbered]
            probes = [dataclasses.replace(c, fail_to_pass=tests, pass_to_pass=()) for c in batch]
            before = await grade_many([(p, PROBE_PATCH) for p in probes], repos, concurrency=concurrency)
            graded += len(batch)
            caught = []
            for candidate, result in zip(batch, before, strict=True):
                failing = tuple(t for t in tests if result.tests.get(t) != "passed")
                if result.status == "unresolved" and failing:
                    passing = tuple(t for t in tests if t not in failing)
                    caught.append(dataclasses.replace(candidate, fail_to_pass=failing, pass_to_pass=passing))
            after = await grade_many([(c, c.patch) for c in caught], repos, concurrency=concurrency)
            resolved = {c.instance_id: c for c, result in zip(caught, after, strict=True) if result.resolved}
            for candidate in batch:
                if candidate.instance_id in resolved and len(kept) < per_task:
                    kept.append(resolved[candidate.instance_id])
                else:
                    shutil.rmtree(out_repos / candidate.repo.replace("/", "__"), ignore_errors=True)
    return kept, graded


def fixed_tree(source: SweInstance, repos_dir: str | Path, target: Path) -> None:
    """Extract the source's repository at `base_commit` into `target` and apply its gold patch."""
    target.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(repository_archive(source, repos_dir))) as archive:
        archive.extractall(target, filter="data")
    if source.patch.strip():
        git(["apply", "--whitespace=nowarn", "-"], cwd=target, input=source.patch.encode())


def candidate_bugs(tree: Path) -> list[Bug]:
    """Every injectable bug in the tree's modules outside the tests, in a fixed order; a bug whose quoted
    expression would occur more than once in its file is left out (a `str_replace` of it would be ambiguous)."""
    found: list[Bug] = []
    for path in sorted(tree.rglob("*.py")):
        rel = path.relative_to(tree).as_posix()
        parts = rel.split("/")
        if any(p in ("tests", "test") for p in parts) or parts[-1].startswith("test_") or parts[-1] == "conftest.py":
            continue
        source = path.read_text()
        try:
            sites = injected_bugs.sites(rel, source)
        except SyntaxError:
            continue
        for site in sites:
            found += injected_bugs.unique_bugs(site, source)
    return found


def _candidate(source: SweInstance, bug: Bug, k: int, tree: Path, out_repos: Path) -> SweInstance:
    """The task for `bug`: its repository built under `out_repos` with the bug committed."""
    path = tree / bug.path
    fixed = path.read_text()
    buggy = bug.apply(fixed)
    owner, name = source.repo.split("/", 1)
    repo = f"{owner}/{name}-synth-{k:03d}"
    target = out_repos / repo.replace("/", "__")
    shutil.rmtree(target, ignore_errors=True)  # left by an earlier run into the same directory
    path.write_text(buggy)
    try:
        commit = build_repository(tree, target)
    finally:
        path.write_text(fixed)
    return dataclasses.replace(
        source,
        instance_id=f"{source.instance_id}-synth-{k:03d}",
        repo=repo,
        base_commit=commit,
        problem_statement=bug.statement,
        patch=unified_diff(bug.path, buggy, fixed),
        tier="easy",
        split="train",
        hints_text="",
    )


def unified_diff(path: str, before: str, after: str, *, new: bool = False) -> str:
    """A `git apply`-able diff of one file; `new`: the file does not exist before (`before` is then empty)."""
    source = "/dev/null" if new else f"a/{path}"
    body = difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True), source, f"b/{path}")
    return f"diff --git a/{path} b/{path}\n" + ("new file mode 100644\n" if new else "") + "".join(body)


def copy_repository(instance: SweInstance, repos_dir: Path, out_repos: Path) -> None:
    """Copy `instance`'s repository (a clone or a tarball) from `repos_dir` into `out_repos`, unless it is there."""
    slug = instance.repo.replace("/", "__")
    for name in (slug, f"{instance.instance_id}.tar.gz", f"{slug}.tar.gz"):
        source, target = repos_dir / name, out_repos / name
        if target.exists() or not source.exists():
            continue
        if source.is_dir():
            shutil.copytree(source, target)
        else:
            shutil.copy2(source, target)
