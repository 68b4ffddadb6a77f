"""The built wheel carries the SWE scaffold's bundled repositories and tasks, and they load from it."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def test_wheel_contains_the_bundled_swe_tasks(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path / "dist"), str(ROOT)],
        check=True,
        capture_output=True,
    )
    wheel = next((tmp_path / "dist").glob("agentrl-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"agentrl/scaffolds/swe/tasks.jsonl", "agentrl/tools/swe/swe_tools.py"} <= names
    sources = [p.relative_to(ROOT / "scaffolds") for p in (ROOT / "scaffolds/swe/repos").rglob("*.py")]
    assert sources and all(f"agentrl/scaffolds/{p.as_posix()}" in names for p in sources)
    assert not any("__pycache__" in n for n in names if n.startswith("agentrl/scaffolds/swe/repos/"))

    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    # The installed copy alone (no repository checkout on the path) builds every bundled repository.
    code = (
        "import sys\n"
        f"sys.path.insert(0, {str(site)!r})\n"
        "from agentrl.scaffolds.swe import bundled\n"
        f"assert bundled.__file__.startswith({str(site)!r}), bundled.__file__\n"
        "print(len(list(bundled.repos_dir().iterdir())))\n"
    )
    env = {"PATH": "/usr/bin:/bin", "AGENTRL_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert out.returncode == 0 and out.stdout.strip() == "24", out.stderr[-2000:]
