"""`agentrl train policy.backend=openai` against `agentrl serve --model tiny` in another process: the server gets the
learner's weights after every step, so sampling stays on-policy; a server that cannot take weights is refused before
training starts, unless `policy.off_policy=true`.

The on-policy bound on `train/sampler_logprob_abs_diff` (the mean |learner − sampler| logprob over the step's loss
tokens) is 1e-4. In sync, both sides run the same float32 weights on the CPU and differ only by the order of float
operations (batch shapes): about 5e-7, as with the in-process sampler. Against fixed weights the gap is already
about 1e-3 one step later and grows from there, so 1e-4 separates the two by more than an order of magnitude each way.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.slow

TOKEN = "train-weights-token"
ON_POLICY_BOUND = 1e-4
SMALL = [
    "rollout.prompts_per_step=4",
    "rollout.samples_per_prompt=4",
    "eval.every_steps=0",
    "progress=false",
    "tensorboard=false",
]
ENV = {k: v for k, v in os.environ.items() if k != "AGENTRL_WEIGHTS_TOKEN"} | {"PYTHONUNBUFFERED": "1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def agentrl_serve(*flags: str) -> Iterator[str]:
    """`agentrl serve --model tiny` in a process of its own; yields its URL once it answers."""
    port = free_port()
    command = [sys.executable, "-m", "agentrl.cli.app", "serve", "--model", "tiny", "--device", "cpu"]
    server = subprocess.Popen(
        [*command, "--port", str(port), *flags], env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, server.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "agentrl serve did not answer within 120 s"
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def train(out: Path, name: str, url: str, *overrides: str) -> subprocess.CompletedProcess:
    args = [*SMALL, "policy.backend=openai", f"policy.base_url={url}/v1", f"output_dir={out}", f"name={name}"]
    command = [sys.executable, "-m", "agentrl.cli.app", "train", *args, *overrides]
    return subprocess.run(command, env=ENV, capture_output=True, text=True, timeout=900)


def metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_training_against_a_server_stays_on_policy_every_step(tmp_path):
    steps = 3
    with agentrl_serve("--weights-token", TOKEN) as url:
        done = train(tmp_path, "run", url, f"policy.weight_sync_token={TOKEN}", f"trainer.steps={steps}")
        assert done.returncode == 0, done.stderr[-3000:]
        version = httpx.get(url + "/admin/weights").json()["version"]
    lines = metrics(tmp_path / "run")
    assert [m["step"] for m in lines] == list(range(1, steps + 1))
    for m in lines:
        assert m["train/sampler_logprob_abs_diff"] < ON_POLICY_BOUND, m
    # one update when the policy was built (the server starts from the learner's weights), then one per step; each
    # update moves the server's version by exactly one or the trainer stops
    assert version == 1 + steps
    for step in range(1, steps + 1):  # step k samples after k - 1 updates
        episodes = (tmp_path / "run" / "trajectories" / f"step_{step:06d}.jsonl").read_text().splitlines()
        assert {json.loads(e)["policy_version"] for e in episodes} == {step - 1}


def test_a_server_with_updates_disabled_is_refused_unless_training_off_policy(tmp_path):
    with agentrl_serve("--weights-token", TOKEN, "--no-weight-updates") as url:
        refused = train(tmp_path, "refused", url, f"policy.weight_sync_token={TOKEN}", "trainer.steps=2")
        assert refused.returncode == 2, refused.stderr[-3000:]
        errors = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1, refused.stderr[-3000:]
        assert "--no-weight-updates" in errors[0] and "policy.off_policy=true" in errors[0]
        assert not (tmp_path / "refused" / "metrics.jsonl").exists()

        allowed = train(tmp_path, "off", url, "policy.off_policy=true", "trainer.steps=2")
        assert allowed.returncode == 0, allowed.stderr[-3000:]
        assert allowed.stderr.count("training off-policy") == 1
        assert httpx.get(url + "/admin/weights").json()["version"] == 0
    gaps = [m["train/sampler_logprob_abs_diff"] for m in metrics(tmp_path / "off")]
    assert gaps[0] < ON_POLICY_BOUND < gaps[1]  # the learner moved after step 1; the server did not
