"""The bundled SWE tasks: 36 small original Python repositories with one bug each, in three tiers.

Each repository is a plain source tree under `repos/<name>/` at its base state (the bug and the visible tests);
`tasks.jsonl` holds the SWE-bench records: the problem statement (easy: names the file and the wrong expression;
medium: the behaviour and the function; hard: only the symptom), the gold `patch`, the `test_patch` adding the
hidden tests, FAIL_TO_PASS / PASS_TO_PASS, `tier` and `split`. On first use the trees become bare git repositories
under the cache directory (see `repo_build`), laid out as `repos_dir/agentrl-swe__<name>` like any SWE-bench
clone, and each commit is checked against the `base_commit` written in the tasks file.

`python -m agentrl.scaffolds.swe.bundled` rebuilds the repositories and prints each task's base commit, tier and
split (with `--write`, it writes changed base commits back into `tasks.jsonl` after a tree was edited).
"""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
import sys
import tempfile
from pathlib import Path

from agentrl.scaffolds.swe.instances import SweInstance, load_instances
from agentrl.scaffolds.swe.repo_build import build_repository, cache_dir

HERE = Path(__file__).parent
TASKS_FILE = HERE / "tasks.jsonl"
REPOS = HERE / "repos"
TIERS = ("easy", "medium", "hard")


def instances() -> list[SweInstance]:
    """The bundled instances, in file order (by tier, then split)."""
    return load_instances(TASKS_FILE)


@functools.cache
def repos_dir() -> Path:
    """The directory holding the bundled repositories as git clones, built on first use."""
    digest = hashlib.sha256(TASKS_FILE.read_bytes()).hexdigest()[:12]
    target = cache_dir() / f"bundled-{digest}"
    for instance in instances():
        commit = _build(instance, target)
        if commit != instance.base_commit:
            raise RuntimeError(
                f"{instance.instance_id}: the tree builds to {commit}, but tasks.jsonl says {instance.base_commit}; "
                "run `python -m agentrl.scaffolds.swe.bundled --write` after editing a bundled repository"
            )
    return target


def _build(instance: SweInstance, target: Path) -> str:
    name = instance.repo.split("/", 1)[1]
    return build_repository(REPOS / name, target / instance.repo.replace("/", "__"))


def main(argv: list[str]) -> None:
    records = [json.loads(line) for line in TASKS_FILE.read_text().splitlines() if line.strip()]
    scratch = Path(tempfile.mkdtemp(prefix="agentrl-swe-check-"))
    changed = False
    for record in records:
        commit = _build(SweInstance.from_record(record), scratch)
        changed |= commit != record["base_commit"]
        print(f"{record['instance_id']:36s} {commit[:12]} {record['tier']:6s} {record['split']}")
        record["base_commit"] = commit
    shutil.rmtree(scratch, ignore_errors=True)
    if changed and "--write" in argv:
        TASKS_FILE.write_text("".join(json.dumps(r) + "\n" for r in records))


if __name__ == "__main__":
    main(sys.argv[1:])
