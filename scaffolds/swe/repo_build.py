"""Git repositories for SWE tasks: built deterministically from plain source trees, and read back as archives.

The bundled tasks ship as source trees (package data); the first use turns each into a bare git repository in a
cache directory with one commit made from fixed author, committer, dates and message, and every file at mode
100644, so the commit hash is the same on every machine and can be written into the tasks file as `base_commit`.
Only `git` on the host is used; nothing is ever fetched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

IDENTITY = {
    "GIT_AUTHOR_NAME": "agentrl",
    "GIT_AUTHOR_EMAIL": "swe@agentrl.invalid",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00+0000",
    "GIT_COMMITTER_NAME": "agentrl",
    "GIT_COMMITTER_EMAIL": "swe@agentrl.invalid",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00+0000",
}
COMMIT_MESSAGE = "base\n"
_SKIP = {"__pycache__", ".pytest_cache", ".git"}


def cache_dir() -> Path:
    """Where built repositories live: `$AGENTRL_CACHE_DIR/swe/repos`, else `~/.cache/agentrl/swe/repos`."""
    root = os.environ.get("AGENTRL_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "agentrl")
    return Path(root) / "swe" / "repos"


def git(args: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None, input: bytes | None = None):
    """Run git with a clean, fixed configuration; returns stdout bytes, raises RuntimeError with stderr."""
    full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent", "LC_ALL": "C"}
    full_env |= {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"} | (env or {})
    proc = subprocess.run(["git", *args], cwd=cwd, env=full_env, input=input, capture_output=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args[:3])} failed: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout


def source_files(tree: Path) -> list[Path]:
    """The files of a source tree in a fixed order (caches and compiled files left out)."""
    out = []
    for path in sorted(tree.rglob("*")):
        rel = path.relative_to(tree)
        if any(part in _SKIP for part in rel.parts) or path.suffix == ".pyc" or not path.is_file():
            continue
        out.append(rel)
    return out


def build_repository(tree: Path, target: Path) -> str:
    """Make `target` a bare repository whose `main` is one deterministic commit of `tree`; returns its hash.

    Building into a temporary directory and renaming it makes concurrent builders safe: the first rename wins and
    the others find the same commit already there.
    """
    if target.exists():
        return git(["rev-parse", "refs/heads/main"], cwd=target).decode().strip()
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        git(["init", "-q", "--bare", str(scratch)])
        index_env = {"GIT_INDEX_FILE": str(scratch / "build-index")}
        for rel in source_files(tree):
            blob = git(["hash-object", "-w", "--no-filters", "--stdin"], cwd=scratch, input=(tree / rel).read_bytes())
            cacheinfo = f"100644,{blob.decode().strip()},{rel.as_posix()}"
            git(["update-index", "--add", "--cacheinfo", cacheinfo], cwd=scratch, env=index_env)
        tree_id = git(["write-tree"], cwd=scratch, env=index_env).decode().strip()
        commit = git(["commit-tree", tree_id], cwd=scratch, env=IDENTITY, input=COMMIT_MESSAGE.encode())
        commit_id = commit.decode().strip()
        git(["update-ref", "refs/heads/main", commit_id], cwd=scratch)
        (scratch / "build-index").unlink()
        try:
            scratch.rename(target)
        except OSError:  # another builder won the race; its commit is the same
            pass
        return commit_id
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def archive(repo: Path, commit: str) -> bytes:
    """The tree of `commit` in the git repository `repo` (bare or not) as a gzipped tar."""
    return git(["archive", "--format=tar.gz", commit], cwd=repo)
