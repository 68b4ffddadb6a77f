"""A SWE task's repository inside a sandbox: put it there, run pytest there, read the diff back.

Everything here talks to a sandbox (`agentrl.protocols.Sandbox`) only through `exec`, `read_file` and
`write_file`, so it works the same in a local bubblewrap sandbox and a remote one. The repository arrives as a
gzipped tar (base64 text); inside, it becomes a one-commit git repository with a fixed identity and date, and
that commit is the base every diff is taken against.

pytest: the sandbox runs the system Python, which need not have pytest. The pure-Python packages pytest needs
(pytest, _pytest, pluggy, iniconfig, packaging) are copied from this process's environment into the sandbox's
private `/tmp` together with a launcher and a small report plugin, and put first on the import path, so every
sandbox runs the same pytest whatever the system Python has. Pygments, which pytest imports for colour, comes
from the system Python when it has it and is otherwise not needed for plain output.
"""

from __future__ import annotations

import base64
import functools
import importlib
import importlib.util
import io
import json
import os
import py_compile
import tarfile
import tempfile
from pathlib import Path
from typing import Any

PYTEST_DIR = "/tmp/.agentrl-pytest"
PYTEST_PACKAGES = ("pytest", "_pytest", "pluggy", "iniconfig", "packaging", "py")
"""Packages (or single-file modules: `py` is pytest's shim of the old `py` library) copied into the sandbox."""
GIT_ENV = (
    "GIT_CONFIG_NOSYSTEM=1",
    "GIT_CONFIG_GLOBAL=/dev/null",
    "GIT_AUTHOR_NAME=agentrl",
    "GIT_AUTHOR_EMAIL=swe@agentrl.invalid",
    "GIT_AUTHOR_DATE=2024-01-01T00:00:00+0000",
    "GIT_COMMITTER_NAME=agentrl",
    "GIT_COMMITTER_EMAIL=swe@agentrl.invalid",
    "GIT_COMMITTER_DATE=2024-01-01T00:00:00+0000",
)

_LAUNCHER = """\
import os, sys
# The repository must be importable as under `python -m pytest`, but must not shadow the harness's pytest.
sys.path.insert(1, os.getcwd())
import pytest
sys.exit(pytest.main())
"""

_REPORT_PLUGIN = '''\
"""Records one outcome per test id (passed / failed / skipped / error) and writes them as JSON at the end."""
import json, os

_outcomes = {}


def pytest_runtest_logreport(report):
    current = _outcomes.get(report.nodeid)
    if report.failed:
        _outcomes[report.nodeid] = "failed"
    elif current == "failed":
        return
    elif report.skipped:
        _outcomes[report.nodeid] = "skipped"
    elif report.when == "call" and current != "skipped":
        _outcomes[report.nodeid] = "passed"


def pytest_collectreport(report):
    if report.failed:
        _outcomes[report.nodeid or "<collection>"] = "error"


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get("AGENTRL_SWE_REPORT")
    if path:
        with open(path, "w") as f:
            json.dump(_outcomes, f)
'''

_UNPACK = """\
import base64, io, sys, tarfile
data = base64.b64decode(sys.stdin.read())
with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
    tar.extractall(sys.argv[1], **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
"""

_COMMIT_BASE = """\
set -e
cd "$1"
git init -q
git add -A --force
printf '%s\\n' __pycache__/ '*.pyc' .pytest_cache/ > .git/info/exclude
git commit -q --allow-empty -m base
git rev-parse HEAD
"""


@functools.cache
def pytest_bundle_b64() -> str:
    """pytest and its pure-Python dependencies from this environment, with the launcher and the report plugin,
    as a base64 gzipped tar to unpack at `PYTEST_DIR`."""
    buffer = io.BytesIO()
    with tempfile.TemporaryDirectory() as scratch, tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name in PYTEST_PACKAGES:
            origin = Path(importlib.import_module(name).__file__)
            if origin.name != "__init__.py":
                tar.add(origin, arcname=origin.name, recursive=False)
                continue
            root = origin.parent
            for path in sorted(root.rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                    arcname = f"{name}/{path.relative_to(root).as_posix()}"
                    tar.add(path, arcname=arcname, recursive=False)
                    if path.suffix == ".py":
                        _add_bytecode(tar, path, arcname, scratch)
        for arcname, text in (("run_pytest.py", _LAUNCHER), ("agentrl_swe_report.py", _REPORT_PLUGIN)):
            data = text.encode()
            info = tarfile.TarInfo(arcname)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return base64.b64encode(buffer.getvalue()).decode()


def _add_bytecode(tar: tarfile.TarFile, source: Path, arcname: str, scratch: str) -> None:
    """Bytecode that is valid whatever the file's mtime (unchecked hash): a sandbox Python of the same version
    imports pytest without compiling it first, which saves half a second on every fresh sandbox; another
    version ignores it."""
    cfile = os.path.join(scratch, "out.pyc")
    try:
        py_compile.compile(
            str(source),
            cfile,
            dfile=f"{PYTEST_DIR}/{arcname}",
            doraise=True,
            invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
        )
    except py_compile.PyCompileError:
        return
    tar.add(cfile, arcname=importlib.util.cache_from_source(arcname), recursive=False)


class WorkspaceError(RuntimeError):
    """A step that must succeed on any healthy sandbox failed (the repository could not be unpacked)."""


async def unpack(sandbox: Any, archive_b64: str, target: str, *, timeout_s: float = 60.0) -> None:
    """Extract a base64 gzipped tar into `target` inside the sandbox."""
    result = await sandbox.exec(["python3", "-c", _UNPACK, target], timeout_s=timeout_s, stdin=archive_b64)
    if result.exit_code != 0:
        raise WorkspaceError(f"unpacking into {target} failed: {result.stderr.strip()[-500:]}")


async def install_pytest(sandbox: Any) -> None:
    """Put the harness's pytest at `PYTEST_DIR` in the sandbox."""
    await unpack(sandbox, pytest_bundle_b64(), PYTEST_DIR)


async def materialise(sandbox: Any, archive_b64: str) -> str:
    """Unpack the repository into the workspace and commit it; returns the base commit id inside the sandbox."""
    workspace = sandbox.workspace
    await unpack(sandbox, archive_b64, workspace)
    result = await sandbox.exec(["env", *GIT_ENV, "bash", "-c", _COMMIT_BASE, "commit", workspace], timeout_s=60.0)
    if result.exit_code != 0:
        raise WorkspaceError(f"committing the base failed: {result.stderr.strip()[-500:]}")
    return result.stdout.strip().splitlines()[-1]


async def diff(sandbox: Any, base: str) -> str:
    """The workspace's changes against `base` (new files included) as a unified diff; "" when git cannot tell
    (the agent removed `.git`): an unreadable workspace is an empty submission, not an infrastructure failure."""
    script = 'cd "$1" && git add -A && git diff --cached --no-color --no-ext-diff "$2" > /tmp/.agentrl-model.patch'
    result = await sandbox.exec(
        ["env", *GIT_ENV, "bash", "-c", script, "diff", sandbox.workspace, base], timeout_s=60.0
    )
    if result.exit_code != 0:
        return ""
    return await sandbox.read_file("/tmp/.agentrl-model.patch")


def pytest_argv(args: list[str], *, report: str | None = None) -> list[str]:
    """argv running the harness's pytest in the workspace with plugins only from the harness, never from
    entry points the repository could declare, and without writing a cache."""
    env = [f"PYTHONPATH={PYTEST_DIR}", "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1", "PYTHONDONTWRITEBYTECODE=1"]
    if report:
        env.append(f"AGENTRL_SWE_REPORT={report}")
    head = ["env", "-u", "PYTEST_ADDOPTS", "-u", "PYTEST_PLUGINS", *env, "python3", "-s", f"{PYTEST_DIR}/run_pytest.py"]
    return head + ["-p", "no:cacheprovider", "-p", "agentrl_swe_report", *args]


def report_json(text: str) -> dict[str, str]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
