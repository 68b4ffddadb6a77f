"""Grading in real sandboxes: what resolves a bundled task, and the ways a patch could fake a pass that must not.

Every cheat below leaves the bug in place, so each must grade unresolved; the last test applies all of them
together with the gold fix, which must still resolve (the grade restores what it protects, it does not reject
patches that touch it).
"""

import dataclasses
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from agentrl.scaffolds.swe import bundled
from agentrl.scaffolds.swe.grading import grade, grade_many
from agentrl.scaffolds.swe.instances import repository_archive

from agentrl.sandbox.config import SandboxConfig

pytestmark = pytest.mark.integration

TASK = "agentrl-swe__mathkit-1"  # mean() divides by len + 1; hidden tests in tests/test_mean.py


@pytest.fixture(scope="module")
def repos(tmp_path_factory):
    return str(bundled.repos_dir())


def instance(instance_id):
    return next(i for i in bundled.instances() if i.instance_id == instance_id)


def make_patch(repos: str, instance_id: str, edits: dict[str, str | None], *, gold: bool = False) -> str:
    """A patch against the task's base made the way an agent would make it: edit files, `git diff`."""
    task = instance(instance_id)
    work = Path(tempfile.mkdtemp())
    try:
        subprocess.run(["tar", "xz"], cwd=work, input=repository_archive(task, repos), check=True)
        git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
        subprocess.run([*git, "init", "-q"], cwd=work, check=True)
        subprocess.run([*git, "add", "-A"], cwd=work, check=True)
        subprocess.run([*git, "commit", "-qm", "base"], cwd=work, check=True)
        if gold:
            subprocess.run([*git, "apply"], cwd=work, input=task.patch.encode(), check=True)
        for path, text in edits.items():
            if text is None:
                (work / path).unlink()
            else:
                (work / path).parent.mkdir(parents=True, exist_ok=True)
                (work / path).write_text(text)
        subprocess.run([*git, "add", "-A", "--force"], cwd=work, check=True)
        return subprocess.run([*git, "diff", "--cached"], cwd=work, check=True, capture_output=True, text=True).stdout
    finally:
        shutil.rmtree(work)


FAKE_HIDDEN_TESTS = "def test_mean_of_three():\n    pass\n\n\ndef test_mean_of_one():\n    pass\n"
EXIT_EARLY = "import os\nos._exit(0)\n"
FORCE_PASS = """\
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"
    report.longrepr = None
"""
CHEATS = {
    "pre-written hidden tests": {"tests/test_mean.py": FAKE_HIDDEN_TESTS},
    "visible tests emptied": {"tests/test_ops.py": "def test_total():\n    pass\n"},
    "visible tests deleted": {"tests/test_ops.py": None},
    "conftest exits 0": {"conftest.py": EXIT_EARLY},
    "nested conftest forces passes": {"tests/conftest.py": FORCE_PASS},
    "pytest.ini collects nothing": {"pytest.ini": "[pytest]\naddopts = --collect-only\npython_functions = nothing\n"},
    "pyproject addopts": {"pyproject.toml": '[tool.pytest.ini_options]\naddopts = "-p no:python"\n'},
    "setup.cfg addopts": {"setup.cfg": "[tool:pytest]\naddopts = --co\n"},
    "tox.ini addopts": {"tox.ini": "[pytest]\naddopts = --co\n"},
    "pytest shadowed": {"pytest.py": "import sys\nsys.exit(0)\n", "_pytest/__init__.py": EXIT_EARLY},
    "entry-point plugin": {
        "evil-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n",
        "evil-1.0.dist-info/entry_points.txt": "[pytest11]\nevil = evil_plugin\n",
        "evil_plugin.py": FORCE_PASS,
    },
    "sitecustomize": {"sitecustomize.py": EXIT_EARLY},
    "gitignored conftest": {".gitignore": "conftest.py\n", "conftest.py": FORCE_PASS},
}


async def test_cheats_do_not_resolve_an_unfixed_bug(repos):
    task = instance(TASK)
    names = list(CHEATS)
    results = await grade_many([(task, make_patch(repos, TASK, CHEATS[n])) for n in names], repos, concurrency=4)
    verdicts = {n: (r.status, r.tests) for n, r in zip(names, results, strict=True)}
    assert all(r.status == "unresolved" for r in results), verdicts
    for r in results:  # the hidden tests ran (the real ones, not the pre-written ones) and failed
        assert r.tests["tests/test_mean.py::test_mean_of_three"] == "failed"


async def test_all_cheats_together_with_the_gold_fix_still_resolve(repos):
    everything = {
        path: text for edits in CHEATS.values() for path, text in edits.items() if path != "tests/test_ops.py"
    }
    everything["tests/test_ops.py"] = None
    result = await grade(instance(TASK), make_patch(repos, TASK, everything, gold=True), repos)
    assert result.resolved and result.status == "resolved", (result.tests, result.log)


async def test_patches_that_fix_nothing_or_do_not_apply_score_zero(repos):
    chosen = [i for i in bundled.instances() if i.split == "test"][:4]
    noop = [(i, make_patch(repos, i.instance_id, {"NOTES.txt": "looked around\n"})) for i in chosen]
    garbage = (chosen[0], "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1,1 +1,1 @@\n-a\n+b\n")
    results = await grade_many([*noop, garbage, (chosen[0], "")], repos, concurrency=4)
    assert [r.status for r in results] == ["unresolved"] * len(noop) + ["patch_failed", "empty_patch"]
    assert not any(r.resolved for r in results)
    for (task, _), r in zip(noop, results, strict=False):  # the bug is real: its hidden tests fail at base
        assert all(r.tests[t] == "failed" for t in task.fail_to_pass), r.tests
        assert all(r.tests[t] == "passed" for t in task.pass_to_pass), r.tests


async def test_a_patch_that_hangs_is_its_own_fault_not_the_machines(repos):
    hang = "def total(values):\n    return sum(values)\n\n\ndef mean(values):\n    while True:\n        pass\n"
    patch = make_patch(repos, TASK, {"mathkit/ops.py": hang})
    result = await grade(instance(TASK), patch, repos, test_timeout_s=3.0)
    assert result.status == "timeout" and not result.resolved and not result.infra_failure


async def test_tests_too_slow_even_without_the_patch_are_an_infrastructure_failure(repos):
    task = instance(TASK)
    slow_test = "import time\n\n\ndef test_slow():\n    time.sleep(30)\n"
    test_patch = make_patch(repos, TASK, {"tests/test_slow.py": slow_test})
    slow = dataclasses.replace(
        task,
        test_patch=task.test_patch + test_patch,
        pass_to_pass=(*task.pass_to_pass, "tests/test_slow.py::test_slow"),
    )
    result = await grade(slow, task.patch, repos, test_timeout_s=2.0)
    assert result.infra_failure and not result.resolved and "unpatched" in result.error


async def test_a_sandbox_that_cannot_start_is_an_infrastructure_failure(repos):
    result = await grade(instance(TASK), instance(TASK).patch, repos, sandbox=SandboxConfig(python="/nonexistent"))
    assert result.infra_failure and result.error
