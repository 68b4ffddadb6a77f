"""Real training on the shipped tiny policy: parameters move, the loss stays finite, and a killed run resumes."""

import json
import math
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from agentrl.config import load_config
from agentrl.trainer import Trainer

pytestmark = pytest.mark.slow

SMALL = [
    "rollout.prompts_per_step=4",
    "rollout.samples_per_prompt=4",
    "eval.max_tasks=8",
    "progress=false",
    "tensorboard=false",
]


def test_a_few_steps_change_parameters_and_keep_the_loss_finite(tmp_path):
    cfg = load_config(None, SMALL + ["trainer.steps=2", "eval.every_steps=0", "trainer.lr=1e-3"])
    trainer = Trainer(cfg, tmp_path)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.run()
    changed = [n for n, p in trainer.model.named_parameters() if not torch.equal(before[n], p.detach())]
    assert changed, "no parameter changed"
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    trained = [m for m in lines if "train/loss" in m]
    assert trained and all(math.isfinite(m["train/loss"]) for m in trained)
    assert (tmp_path / "trajectories" / "step_000002.jsonl").exists()
    assert (tmp_path / "checkpoints" / "step_000002" / "policy" / "config.json").exists()


def _train_cmd(*args):
    return [sys.executable, "-m", "agentrl.cli.app", "train", *args]


def test_killed_run_resumes_from_its_checkpoint(tmp_path):
    args = SMALL + [
        "trainer.steps=4",
        "checkpoint_every_steps=2",
        "eval.every_steps=2",
        f"output_dir={tmp_path}",
        "name=run",
    ]
    run_dir = tmp_path / "run"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(_train_cmd(*args), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while not (run_dir / "checkpoints" / "step_000002").exists():
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        assert time.monotonic() < deadline, "no checkpoint within 300 s"
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (run_dir / "checkpoints" / "step_000004").exists()

    done = subprocess.run(_train_cmd("--resume", str(run_dir)), env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    steps = [json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert steps == sorted(steps) and len(steps) == len(set(steps))  # no step logged twice
    assert steps[-1] == 4 and {1, 2, 3, 4} <= set(steps)
    state = json.loads((run_dir / "checkpoints" / "step_000004" / "trainer_state.json").read_text())
    assert state["step"] == 4 and state["policy_version"] == 4
    assert (run_dir / "plots" / "heldout_success.png").exists()
    evals = sorted(p.name for p in (run_dir / "trajectories").glob("eval_step_*.jsonl"))
    assert evals == ["eval_step_000000.jsonl", "eval_step_000002.jsonl", "eval_step_000004.jsonl"]
    episodes = [json.loads(line) for line in (run_dir / "trajectories" / "eval_step_000004.jsonl").open()]
    assert len(episodes) == 8 * load_config(run_dir / "config.toml").eval.samples_per_task


def test_a_step_where_every_trajectory_hits_an_infra_failure_stops_the_run(tmp_path):
    from agentrl.scaffolds.code.tools import calculate
    from agentrl.scaffolds.search.tools import lookup

    from agentrl.testing import serve_in_thread
    from agentrl.toolserver.app import create_app

    with serve_in_thread(create_app([calculate, lookup])) as url:  # up while the run checks it, gone when it runs
        cfg = load_config(None, SMALL + ["trainer.steps=2", "eval.every_steps=0", f"tool_servers={url}"])
        trainer = Trainer(cfg, tmp_path)
    with pytest.raises(RuntimeError, match="every trajectory of step 1 failed"):
        trainer.run()
    assert not (tmp_path / "checkpoints").exists()  # nothing was trained on, nothing saved
