"""The built wheel installs the four rooms under one namespace (`agentrl.tools`, `agentrl.scaffolds`,
`agentrl.rewards`) with the tiny policy as package data, and imports from a fresh virtual environment."""

import json
import site
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """One wheel built from the checkout, shared by the tests below (a build takes seconds)."""
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(ROOT)],
        check=True,
        capture_output=True,
    )
    return next(dist.glob("agentrl-*.whl"))


def test_wheel_installs_and_imports_in_a_fresh_venv(wheel, tmp_path):
    names = zipfile.ZipFile(wheel).namelist()
    assert "agentrl/tools/__init__.py" in names
    assert "agentrl/scaffolds/code/tasks.py" in names and "agentrl/rewards/outcome.py" in names
    assert "agentrl/tiny/policy/model.safetensors" in names and "agentrl/tiny/policy/tokenizer.json" in names
    assert {f"agentrl/view/static/{f}" for f in ("index.html", "view.js", "view.css")} <= set(names)
    assert not any(n.startswith(("tools/", "scaffolds/", "rewards/")) for n in names)  # no generic top-level packages

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    purelib = subprocess.check_output(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
    ).strip()
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(purelib)  # a wheel is a zip laid out for site-packages
    # dependencies come from this environment's site-packages (appended after the fresh venv's own)
    Path(purelib, "deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    code = (
        "import agentrl, agentrl.tools, agentrl.scaffolds.code, agentrl.scaffolds.search, agentrl.rewards.outcome\n"
        "from agentrl.tiny import SHIPPED\n"
        f"assert agentrl.__file__.startswith({purelib!r}), agentrl.__file__\n"
        "assert all((path / 'model.safetensors').exists() for path in SHIPPED.values())\n"
        "from agentrl.scaffolds.code import CodeScaffold\n"
        "assert len(CodeScaffold().tasks('test')) > 0\n"
        "print('ok')\n"
    )
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_wheel_contains_the_bundled_swe_tasks(wheel, tmp_path):
    """The SWE scaffold's bundled repositories and tasks are in the wheel, and load from the installed copy."""
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
    records = (ROOT / "scaffolds/swe/tasks.jsonl").read_text().splitlines()
    repos = {json.loads(line)["repo"] for line in records if line.strip()}
    assert len(repos) >= 24
    assert out.returncode == 0 and out.stdout.strip() == str(len(repos)), out.stderr[-2000:]
