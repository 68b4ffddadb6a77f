"""Two runs a newcomer meets, through the real `agentrl train`: a judge that fails every request is an
infrastructure failure (said in the progress line, the run stops after `reward_outage_steps` with one error line),
and a run started with relative task paths resumes from another working directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentrl.testing import scripted_chat_app, serve_in_thread

pytestmark = pytest.mark.slow

SMALL = [
    "rollout.prompts_per_step=2",
    "rollout.samples_per_prompt=2",
    "eval.every_steps=0",
    "progress=false",
    "tensorboard=false",
]
JUDGES = """from agentrl.judge import Judge


class Grader(Judge):
    rubric = "{answer}"


grader = Grader()
"""


def train(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True", **(env or {})}
    command = [str(Path(sys.executable).with_name("agentrl")), "train", *args]
    return subprocess.run(command, cwd=cwd, env=environment, capture_output=True, text=True, timeout=600)


def test_a_judge_that_fails_every_request_stops_the_run(tmp_path):
    def down(messages):
        raise RuntimeError("the judge model is down")

    (tmp_path / "judges.py").write_text(JUDGES)
    with serve_in_thread(scripted_chat_app(down)) as url:  # answers the preflight, fails every judgement
        done = train(
            tmp_path,
            *SMALL,
            "trainer.steps=4",
            "reward_outage_steps=2",
            "rewards=[exact_match,judges:grader:0.5]",
            "name=run",
            env={"AGENTRL_JUDGE_MODEL": "judge", "AGENTRL_JUDGE_BASE_URL": f"{url}/v1"},
        )
    assert done.returncode == 1, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert "step 1/4 reward FAILED" in lines[lines.index(next(x for x in lines if x.startswith("step 1/4")))]
    warning = next(x for x in lines if x.startswith("warning: step 1: reward grader scored nothing"))
    assert "4 of 4 requests failed (InternalServerError: OpenAIException" in warning and "after 2 such steps" in warning
    errors = [x for x in done.stderr.splitlines() if x.startswith("error: ")]
    assert errors == [done.stderr.strip().splitlines()[-1]] and "Traceback" not in done.stderr
    assert errors[0].startswith("error: reward grader scored nothing: 4 of 4 requests failed")
    assert "2 steps in a row (reward_outage_steps=2); check the reward's endpoint" in errors[0]
    assert "Give Feedback" not in done.stdout + done.stderr  # litellm's banner stays quiet
    steps = [json.loads(x)["step"] for x in (tmp_path / "runs" / "run" / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1]  # the second failed step stopped the run before it was logged


def test_a_run_with_relative_task_paths_resumes_from_another_directory(tmp_path):
    started, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    (started / "data").mkdir(parents=True)
    elsewhere.mkdir()
    rows = [{"prompt": f"What is {a} * 7?", "answer": str(a * 7)} for a in range(10, 18)]
    (started / "data" / "tasks.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    args = ["scaffold=react", "tools=agentrl.scaffolds.code.tools:calculate", "tasks=data/tasks.jsonl", *SMALL]
    first = train(started, *args, "trainer.steps=1", "name=run")
    assert first.returncode == 0, first.stderr[-3000:]
    run_dir = started / "runs" / "run"
    assert f'path = "{started / "data" / "tasks.jsonl"}"' in (run_dir / "config.toml").read_text()
    resumed = train(elsewhere, "--resume", str(run_dir), "trainer.steps=2")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    steps = [json.loads(x)["step"] for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2]
