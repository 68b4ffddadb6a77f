"""The built wheel installs the four rooms under one namespace (`agentrl.tools`, `agentrl.scaffolds`,
`agentrl.rewards`) with the tiny policy as package data, and imports from a fresh virtual environment."""

import site
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def test_wheel_installs_and_imports_in_a_fresh_venv(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path / "dist"), str(ROOT)],
        check=True,
        capture_output=True,
    )
    wheel = next((tmp_path / "dist").glob("agentrl-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "agentrl/tools/__init__.py" in names
    assert "agentrl/scaffolds/code/tasks.py" in names and "agentrl/rewards/outcome.py" in names
    assert "agentrl/tiny/policy/model.safetensors" in names and "agentrl/tiny/policy/tokenizer.json" in names
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
        "from agentrl.tiny import POLICY_DIR\n"
        f"assert agentrl.__file__.startswith({purelib!r}), agentrl.__file__\n"
        "assert (POLICY_DIR / 'config.json').exists()\n"
        "from agentrl.scaffolds.code import CodeScaffold\n"
        "assert len(CodeScaffold().tasks('test')) > 0\n"
        "print('ok')\n"
    )
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
