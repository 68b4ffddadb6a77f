"""`agentrl train --nproc 2` (gloo, CPU, the tiny policy) against one process on the same global batch.

Two processes split every step's tasks and every mini-batch between them and sum their gradients; one process
does it all. The trajectories are the same (each samples from a seed of its own), so the weights must agree up to
the order of float additions. Adam divides each gradient by its running RMS: where a gradient is near 0 (a few
times Adam's eps, 1e-8) a rounding difference of 1e-9 moves that weight by a good fraction of the learning rate,
so the tolerance is a tenth of the learning rate (2e-5) for the largest difference (~3e-6 seen; a step moves
weights by up to 4e-4), and 1e-8 for the mean difference (~3e-10 seen).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

pytestmark = pytest.mark.slow

ATOL = 2e-5
"""Largest difference allowed between a weight trained by two processes and by one (lr / 10, lr = 2e-4)."""

SMALL = [
    "rollout.prompts_per_step=4",
    "rollout.samples_per_prompt=4",
    "eval.every_steps=0",
    "progress=false",
    "tensorboard=false",
    "checkpoint_every_steps=1",
    "trainer.minibatches_per_step=2",
]

REFERENCE = ("trainer.steps=2", "eval.every_steps=1", "eval.max_tasks=8")
"""The one-process run (the `one_process_run` fixture) that several processes, FSDP and Ray runs are compared with."""


def train(tmp_path: Path, name: str, *args: str, nproc: int = 1, wait: bool = True) -> subprocess.Popen:
    command = [sys.executable, "-m", "agentrl", "train", f"output_dir={tmp_path}", *SMALL, *args]
    command += ["--nproc", str(nproc)] if nproc > 1 else []
    command += ["--name", name] if name else []
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    if wait:
        out, _ = process.communicate(timeout=600)
        assert process.returncode == 0, out[-12000:]  # room for the stacks of a rank that crashed below Python
    return process


def weights(run_dir: Path, step: int) -> dict[str, torch.Tensor]:
    return load_file(run_dir / "checkpoints" / f"step_{step:06d}" / "weights.safetensors")


def largest_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k].float() - b[k].float()).abs().max()) for k in a)


def mean_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    total = sum(float((a[k].float() - b[k].float()).abs().sum()) for k in a)
    return total / sum(a[k].numel() for k in a)


def test_two_processes_train_the_weights_one_process_trains(tmp_path, one_process_run):
    alone_dir = one_process_run(*REFERENCE)
    train(tmp_path, "two", *REFERENCE, nproc=2)
    one, two = weights(alone_dir, 2), weights(tmp_path / "two", 2)
    start = weights(alone_dir, 1)
    moved = largest_difference(one, start)
    assert moved > 10 * ATOL, moved  # the step changed the weights, so agreeing is not trivial
    assert largest_difference(one, two) < ATOL
    assert mean_difference(one, two) < 1e-8  # nearly every weight agrees to rounding (~3e-10 seen)
    records = [json.loads(line) for line in (tmp_path / "two" / "metrics.jsonl").read_text().splitlines()]
    alone = [json.loads(line) for line in (alone_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [0, 1, 2]  # only rank 0 writes the logs, once per step
    for key in ("reward/mean", "eval/success", "eval/episodes"):  # the whole batch and evaluation, gathered
        assert [r.get(key) for r in records] == [r.get(key) for r in alone], key
    assert records[-1]["eval/episodes"] == 8


def kill_after_step_2(tmp_path: Path, name: str, *args: str) -> Path:
    """Train `name` for 3 steps in 2 processes, SIGKILL it once step 2 is checkpointed, and drop a step-3
    checkpoint that may have been written meanwhile; the run directory, ready for `--resume`."""
    run = train(tmp_path, name, "trainer.steps=3", *args, nproc=2, wait=False)
    second = tmp_path / name / "checkpoints" / f"step_{2:06d}"
    deadline = time.monotonic() + 600
    while not second.exists() and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert second.exists(), run.communicate()[0][-3000:]
    os.killpg(run.pid, signal.SIGKILL)  # the launcher and both ranks, mid-way through step 3 or just after
    run.wait()
    for leftover in (tmp_path / name / "checkpoints").glob("step_000003*"):
        shutil.rmtree(leftover)  # killed before step 3 was saved, as it may be
    return tmp_path / name


def test_a_killed_two_process_run_resumes_in_one_process(tmp_path, one_process_run):
    straight = one_process_run("trainer.steps=3")
    kill_after_step_2(tmp_path, "killed")
    train(tmp_path, "", "--resume", str(tmp_path / "killed"))
    assert largest_difference(weights(straight, 3), weights(tmp_path / "killed", 3)) < ATOL
