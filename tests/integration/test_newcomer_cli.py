"""A newcomer's mistakes, through the real `agentrl` command: each is one `error:` line on stderr (no traceback)
and exit code 2 for what the user fixes, 1 for infrastructure, and none leaves a run directory behind.

The commands run in a fresh working directory holding a user's module of tools (`unitconv.py`, importable from
there as `python -m` would import it), task files and a judge; several run at once to keep the test short.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

UNITCONV = '''"""A user's tools."""
from agentrl import tool


@tool
def convert(value: float, source: str, target: str) -> str:
    """Convert a value between units.

    Args:
        value: The number to convert.
        source: Its unit.
        target: The unit wanted.
    """
    return f"{value * 0.621371:.2f}"
'''
JUDGES = '''"""A user's judge."""
from agentrl.judge import Judge


class Grader(Judge):
    rubric = "{answer}"


grader = Grader()  # its endpoint comes from AGENTRL_JUDGE_MODEL / AGENTRL_JUDGE_BASE_URL
'''


def agentrl(work: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True", **(env or {})}
    environment.pop("PYTHONPATH", None)  # the working directory is found without it
    command = [str(Path(sys.executable).with_name("agentrl")), *args]  # the console script: its path is not the cwd
    return subprocess.run(command, cwd=work, env=environment, capture_output=True, text=True, timeout=300)


def one_error(done: subprocess.CompletedProcess[str]) -> str:
    """The single `error:` line a failed command printed (its last line on stderr), without a traceback."""
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error: ")]
    assert "Traceback" not in done.stderr and len(errors) == 1 and lines[-1] == errors[0], done.stderr[-3000:]
    return errors[0]


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("newcomer")
    (work / "unitconv.py").write_text(UNITCONV)
    (work / "judges.py").write_text(JUDGES)
    rows = [json.dumps({"prompt": f"Convert {k} km to mi", "answer": f"{k * 0.621371:.2f}"}) for k in range(8)]
    (work / "tasks.jsonl").write_text("\n".join(rows) + "\n")
    rows[5] = '{"prompt": "Convert 5 km to mi", "answer": '
    (work / "broken.jsonl").write_text("\n".join(rows) + "\n")
    (work / "broken.toml").write_text("seed = 1\n[trainer\nsteps = 2\n")
    return work


CASES = {
    # a user module by name, found in the working directory; the tiny policy cannot see its tool: refused
    "own tools": (
        ("train", "scaffold=react", "tools=unitconv", "tasks=tasks.jsonl"),
        {},
        2,
        "error: the policy (tiny) cannot see the tools convert: its chat template renders no tool schemas and it "
        "learned only calculate(expression), lookup(entity, field) from demonstrations",
    ),
    "tasks line": (
        ("train", "scaffold=react", "tools=agentrl.scaffolds.code.tools", "tasks=broken.jsonl"),
        {},
        2,
        "broken.jsonl:6: not JSON (Expecting value)",  # line 6, not a 0-based row 5
    ),
    "train model": (
        ("train", "--model", "/nonexistent/model"),
        {},
        2,
        "error: model '/nonexistent/model': no such directory",
    ),
    "doctor model": (("doctor", "--model", "/nonexistent/model"), {}, 2, "error: model '/nonexistent/model': no such"),
    "eval model": (("eval", "--model", "/nonexistent"), {}, 2, "error: model '/nonexistent': no such directory"),
    "serve model": (("serve", "--model", "/nonexistent/model"), {}, 2, "error: model '/nonexistent/model': no such"),
    "hub id offline": (("train", "--model", "Org/Not-Cached"), {}, 2, "hf download Org/Not-Cached"),
    "toml syntax": (("train", "-c", "broken.toml"), {}, 2, "error: broken.toml: not valid TOML (Expected ']'"),
    "config typo": (("train", "trainer.setps=3"), {}, 2, "error: unknown config key 'trainer.setps'; did you mean"),
    "judge unreachable": (
        ("train", "rewards=[exact_match,judges:grader:0.5]"),
        {"AGENTRL_JUDGE_MODEL": "judge", "AGENTRL_JUDGE_BASE_URL": "http://127.0.0.1:9/v1"},
        1,
        "error: judge grader's endpoint http://127.0.0.1:9/v1 is not reachable (GET /models: ConnectError",
    ),
    "judge without model": (
        ("train", "rewards=[exact_match,judges:grader:0.5]"),
        {"AGENTRL_JUDGE_MODEL": ""},
        2,
        "error: judge grader has no model: pass one or set AGENTRL_JUDGE_MODEL",
    ),
}


def test_each_mistake_is_one_line_and_leaves_no_run_directory(work: Path) -> None:
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        done = {name: pool.submit(agentrl, work, *args, env=env) for name, (args, env, _, _) in CASES.items()}
    for name, (_, _, code, line) in CASES.items():
        result = done[name].result()
        assert result.returncode == code, (name, result.stderr[-2000:])
        assert line in one_error(result), (name, one_error(result))
    assert "serving" not in done["serve model"].result().stdout  # it never said it served a model that is not there
    assert not (work / "runs").exists() and not (work / "evals").exists()  # nothing started, nothing left


def test_doctor_says_which_tools_a_model_cannot_see(work: Path) -> None:
    blind = agentrl(work, "doctor", "--model", "tiny", "--fast", "--tools", "unitconv")
    assert blind.returncode == 1
    row = next(line for line in blind.stdout.splitlines() if line.startswith("visible tools"))
    assert " fail " in row and row.endswith("it cannot see convert")
    known = agentrl(work, "doctor", "--model", "tiny", "--fast", "--tools", "calculate,lookup")
    assert known.returncode == 0 and "visible tools     ok" in known.stdout


def test_eval_resumes_only_results_of_the_same_settings(work: Path) -> None:
    common = ("eval", "--scaffold", "code", "max_tasks=2", "--output", "evals/code.jsonl")
    first = agentrl(work, *common)
    assert first.returncode == 0, first.stderr[-2000:]
    again = agentrl(work, *common)  # the same settings: nothing to run again
    assert again.returncode == 0 and "skipped_finished" in again.stdout
    assert json.loads((work / "evals" / "code.summary.json").read_text())["skipped_finished"] == 2
    sampled = agentrl(work, *common, "temperature=1.0")
    assert sampled.returncode == 2
    assert one_error(sampled) == (
        "error: evals/code.jsonl holds results of other settings (temperature 0.0 there, 1.0 now): pass "
        "--overwrite to replace them, or --output FILE to keep both"
    )
    replaced = agentrl(work, *common, "temperature=1.0", "--overwrite")
    assert replaced.returncode == 0, replaced.stderr[-2000:]
    assert json.loads((work / "evals" / "code.summary.json").read_text())["skipped_finished"] == 0
