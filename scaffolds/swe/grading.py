"""Grading a patch the way the SWE-bench harness does, in a fresh sandbox instead of a Docker container.

In a sandbox started for this grade alone: the repository at `base_commit`; the model patch applied with
`git apply` (one that does not apply is unresolved); then everything the grade depends on restored to the base
commit whatever the patch did to it: the files `test_patch` touches, the files holding FAIL_TO_PASS and
PASS_TO_PASS tests, every `conftest.py`, pytest configuration (`pytest.ini`, `pyproject.toml`, `setup.cfg`,
`tox.ini`) and `sitecustomize`/`usercustomize`; then `test_patch` applied and the FAIL_TO_PASS and PASS_TO_PASS
ids run with the harness's own pytest (see `agentrl.tools.swe.workspace`: plugins only from the harness, no
entry-point autoloading, no cache, its own launcher first on the import path so a `pytest.py` in the repository
cannot stand in for it). Each id's outcome comes from a report plugin; an id that did not run counts as failed,
so deleting a test or exiting early never passes. Resolved = every id passed.

Infrastructure versus the patch: a sandbox that fails, or a test run that times out while the unpatched
repository's tests (a control run in the same sandbox) also time out, is an infrastructure failure and scores
nothing; a run that times out only with the patch applied is the patch's fault and unresolved.

Known limit: the code under test runs in the pytest process, so a patch that rewrites pytest's internals or the
report at import time could still fake a pass; the SWE-bench harness, which parses the same process's log, shares
this limit.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentrl.scaffolds.swe.instances import SweInstance, repository_archive_b64
from agentrl.tools.swe import workspace

from agentrl.errors import SandboxError
from agentrl.sandbox.config import SandboxConfig
from agentrl.sandbox.provider import SandboxProvider

TEST_TIMEOUT_S = 60.0
"""Longest the FAIL_TO_PASS and PASS_TO_PASS run may take."""
PROTECTED_NAMES = (
    "conftest.py",
    "pytest.ini",
    "pyproject.toml",
    "setup.cfg",
    "tox.ini",
    "sitecustomize.py",
    "usercustomize.py",
)
_ARGS_PATH = "/tmp/.agentrl-grade.json"

# Runs inside the sandbox (system Python, standard library only); prints one JSON object.
_DRIVER = r"""
import json, os, signal, subprocess, sys
a = json.load(open(sys.argv[1]))
os.chdir(a["workspace"])

def git(*args, check=True):
    p = subprocess.run(["git", *args], capture_output=True, text=True)
    if check and p.returncode:
        raise SystemExit(json.dumps({"status": "error", "message": "git %s: %s" % (args[0], p.stderr[-500:])}))
    return p

def restore(path):
    if git("cat-file", "-e", "%s:%s" % (a["base"], path), check=False).returncode == 0:
        git("checkout", a["base"], "--", path)
    else:
        git("rm", "-q", "-r", "-f", "--cached", "--ignore-unmatch", "--", path)
        if os.path.islink(path) or os.path.isfile(path):
            os.remove(path)

def apply(text, name):
    path = "/tmp/.agentrl-%s.patch" % name
    with open(path, "w") as f:
        f.write(text)
    if git("apply", "--check", "--whitespace=nowarn", path, check=False).returncode:
        return False
    git("apply", "--whitespace=nowarn", path)
    return True

if a["control"]:
    git("reset", "-q", "--hard", a["base"])
    git("clean", "-q", "-f", "-d", "-x")
elif a["model_patch"].strip() and not apply(a["model_patch"], "model"):
    print(json.dumps({"status": "patch_failed"}))
    raise SystemExit(0)
git("add", "-A", "--force")  # a file the patch also lists in .gitignore is still a file pytest would load
changed = git("diff", "--cached", "--name-only", "-z", "--no-renames", a["base"]).stdout.split("\0")
for path in sorted(set(p for p in changed if p) | set(a["test_files"])):
    name = path.rsplit("/", 1)[-1]
    if path in a["test_files"] or name in a["protected_names"] or name.endswith(".pth"):
        restore(path)
if a["test_patch"].strip() and not apply(a["test_patch"], "test"):
    print(json.dumps({"status": "test_patch_failed"}))
    raise SystemExit(0)
report = "/tmp/.agentrl-report-%s.json" % os.urandom(8).hex()
argv = [x.replace("@REPORT@", report) for x in a["argv"]]
proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
try:
    out, _ = proc.communicate(timeout=a["timeout_s"])
    status = "ok"
except subprocess.TimeoutExpired:
    os.killpg(proc.pid, signal.SIGKILL)
    out, _ = proc.communicate()
    status = "timeout"
try:
    outcomes = json.load(open(report))
except (OSError, ValueError):
    outcomes = {}
tests = {t: outcomes.get(t, "missing") for t in a["tests"]}
log = out.decode(errors="replace")[-3000:]
print(json.dumps({"status": status, "tests": tests, "exit_code": proc.returncode, "log": log}))
"""


@dataclass(frozen=True)
class GradeResult:
    """The grade of one patch for one instance."""

    instance_id: str
    resolved: bool
    status: str
    """`resolved`, `unresolved`, `empty_patch`, `patch_failed` (does not apply), `timeout` (the patch's fault) or
    `infra_error` (not the patch's fault: no score)."""
    tests: dict[str, str] = field(default_factory=dict)
    """FAIL_TO_PASS and PASS_TO_PASS ids → passed / failed / skipped / error / missing."""
    error: str | None = None
    elapsed_s: float = 0.0
    log: str = ""

    @property
    def infra_failure(self) -> bool:
        return self.status == "infra_error"

    def to_json(self) -> dict[str, Any]:
        return {
            "instance_id": self.instance_id,
            "resolved": self.resolved,
            "status": self.status,
            "tests": self.tests,
            "error": self.error,
            "elapsed_s": round(self.elapsed_s, 3),
        }


def test_files(instance: SweInstance) -> list[str]:
    """Files the grade reads tests from: those of every graded id and those `test_patch` touches."""
    files = {t.split("::", 1)[0] for t in (*instance.fail_to_pass, *instance.pass_to_pass) if "::" in t}
    for line in instance.test_patch.splitlines():
        if line.startswith(("--- a/", "+++ b/")):
            files.add(line[6:].split("\t", 1)[0])
    return sorted(files)


async def grade(
    instance: SweInstance,
    model_patch: str,
    repos_dir: str,
    *,
    sandbox: SandboxConfig | None = None,
    test_timeout_s: float = TEST_TIMEOUT_S,
) -> GradeResult:
    """Grade `model_patch` for `instance` in a fresh sandbox (see the module docstring)."""
    start = time.perf_counter()
    if not model_patch.strip():
        return GradeResult(instance.instance_id, False, "empty_patch")
    provider = SandboxProvider(sandbox or SandboxConfig())
    try:
        box = await provider.start()
        await workspace.install_pytest(box)
        base = await workspace.materialise(box, repository_archive_b64(instance, repos_dir))
        run = await _drive(box, instance, model_patch, base, test_timeout_s, control=False)
        if run.get("status") == "timeout":
            control = await _drive(box, instance, "", base, test_timeout_s, control=True)
            if control.get("status") == "timeout":
                return _infra(
                    instance, "the tests time out on the unpatched repository too: machine overloaded?", start
                )
        result = _result(instance, run)
    except (SandboxError, workspace.WorkspaceError, OSError) as e:
        return _infra(instance, f"{type(e).__name__}: {e}", start)
    finally:
        await provider.close()
    return GradeResult(**{**result.__dict__, "elapsed_s": time.perf_counter() - start})


async def _drive(box: Any, instance: SweInstance, patch: str, base: str, timeout_s: float, control: bool) -> dict:
    args = {
        "workspace": box.workspace,
        "base": base,
        "control": control,
        "model_patch": patch,
        "test_patch": instance.test_patch,
        "test_files": test_files(instance),
        "protected_names": list(PROTECTED_NAMES),
        "tests": [*instance.fail_to_pass, *instance.pass_to_pass],
        "timeout_s": timeout_s,
        "argv": workspace.pytest_argv(
            ["-q", "--no-header", "-rN", "--rootdir", box.workspace, *instance.fail_to_pass, *instance.pass_to_pass],
            report="@REPORT@",
        ),
    }
    await box.write_file(_ARGS_PATH, json.dumps(args))
    result = await box.exec(["env", *workspace.GIT_ENV, "python3", "-c", _DRIVER, _ARGS_PATH], timeout_s=timeout_s + 60)
    if result.timed_out:
        raise SandboxError("the grading driver did not finish")
    try:
        return json.loads(result.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        # The driver is killed or muted only by the code under test (it runs nothing else): the patch's fault.
        return {"status": "ok", "tests": {}, "log": (result.stdout + result.stderr)[-3000:]}


def _result(instance: SweInstance, run: dict) -> GradeResult:
    status = run.get("status")
    if status == "patch_failed":
        return GradeResult(instance.instance_id, False, "patch_failed")
    if status in ("test_patch_failed", "error"):
        message = run.get("message") or "the task's test_patch does not apply to its base commit"
        return GradeResult(instance.instance_id, False, "infra_error", error=message)
    tests = dict(run.get("tests") or {})
    wanted = [*instance.fail_to_pass, *instance.pass_to_pass]
    resolved = status == "ok" and bool(wanted) and all(tests.get(t) == "passed" for t in wanted)
    label = "resolved" if resolved else ("timeout" if status == "timeout" else "unresolved")
    return GradeResult(instance.instance_id, resolved, label, tests=tests, log=run.get("log", ""))


def _infra(instance: SweInstance, message: str, start: float) -> GradeResult:
    return GradeResult(instance.instance_id, False, "infra_error", error=message, elapsed_s=time.perf_counter() - start)


async def grade_many(
    jobs: Sequence[tuple[SweInstance, str]],
    repos_dir: str,
    *,
    concurrency: int = 4,
    sandbox: SandboxConfig | None = None,
    test_timeout_s: float = TEST_TIMEOUT_S,
) -> list[GradeResult]:
    """Grade (instance, patch) pairs, `concurrency` sandboxes at a time, in order."""
    gate = asyncio.Semaphore(concurrency)

    async def one(instance: SweInstance, patch: str) -> GradeResult:
        async with gate:
            return await grade(instance, patch, repos_dir, sandbox=sandbox, test_timeout_s=test_timeout_s)

    return list(await asyncio.gather(*(one(i, p) for i, p in jobs)))
