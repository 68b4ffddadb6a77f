"""agentrl/tiny/build/swe_drill_tasks.py: drawn drills written as SWE-bench tasks, graded afresh in sandboxes."""

import asyncio
import io
import sys
import tarfile

import pytest
from agentrl.scaffolds.swe.grading import grade_many
from agentrl.scaffolds.swe.instances import load_instances, repository_archive
from agentrl.scaffolds.swe.synthesis import PROBE_PATCH

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    from agentrl.tiny.build import swe_drill_tasks as script

    out = tmp_path_factory.mktemp("drills")
    argv = sys.argv
    sys.argv = ["swe_drill_tasks.py", "--out", str(out), "--count", "5", "--seed", "4"]
    try:
        script.main()
    finally:
        sys.argv = argv
    return out, load_instances(out / "tasks.jsonl")


def test_drills_become_easy_training_tasks_beside_the_held_out_ones(written):
    out, instances = written
    drills = [i for i in instances if i.instance_id.startswith("drill-")]
    held_out = [i for i in instances if not i.instance_id.startswith("drill-")]
    assert len(drills) == 5 and len({i.problem_statement for i in drills}) == 5
    assert all(i.split == "train" and i.tier == "easy" for i in drills)
    assert len(held_out) == 9 and all(i.split == "test" and i.tier == "easy" for i in held_out)
    for instance in drills:
        path, _, wrong, right = instance.problem_statement.split("`")[1:8:2]
        with tarfile.open(fileobj=io.BytesIO(repository_archive(instance, out / "repos"))) as archive:
            text = archive.extractfile(path).read().decode()
            assert "tests/test_fix.py" not in archive.getnames()  # the hidden test is not in the workspace
        assert text.count(wrong) == 1 and right not in text.replace(wrong, "")


def near_miss(patch: str) -> str:
    """The gold patch with a space after the fixed expression: it applies, and the module is not the fix."""
    lines = patch.splitlines(keepends=True)
    k = next(k for k, line in enumerate(lines) if line.startswith("+") and not line.startswith("+++"))
    lines[k] = lines[k].rstrip("\n") + " \n"
    return "".join(lines)


def test_only_the_fix_resolves_them(written):
    out, instances = written
    drills = [i for i in instances if i.instance_id.startswith("drill-")]
    jobs = [(i, i.patch) for i in drills] + [(i, PROBE_PATCH) for i in drills] + [(i, "") for i in drills]
    jobs += [(i, near_miss(i.patch)) for i in drills]
    results = asyncio.run(grade_many(jobs, str(out / "repos"), concurrency=2))
    n = len(drills)
    assert all(r.resolved for r in results[:n]), [r.to_json() for r in results[:n]]
    assert all(r.status == "unresolved" and not r.infra_failure for r in results[n : 2 * n])
    assert [r.status for r in results[2 * n : 3 * n]] == ["empty_patch"] * n
    assert all(r.status == "unresolved" for r in results[3 * n :]), [r.to_json() for r in results[3 * n :]]
