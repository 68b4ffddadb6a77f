"""`agentrl train --ray ADDRESS` on a local Ray cluster the tests start (2 CPUs, a bounded object store).

Two rollout-worker actors and two tool-server actors play the episodes; the learner runs in the trainer's process,
or as two Ray actors (`ray.learner_processes=2`: data-parallel ranks, rank 0 holding the workers and handing each
rank its share of the groups), and publishes its weights through the object store after every step. Every
trajectory samples from a seed of its own, so the Ray run samples what one process samples, provided every worker
holds the learner's weights of the step: the weights after two steps must agree with a one-process run's
(tolerance as in test_data_parallel.py).
Then actors are killed mid-step through Ray's API: the run goes on, a lost group is re-issued, episodes whose tool
server died are infrastructure failures (never scored), the held-out evaluation is still measured, and the
killed tool server's sandboxes are gone.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_data_parallel import ATOL, REFERENCE, SMALL, largest_difference, mean_difference, weights

pytestmark = pytest.mark.slow
ray = pytest.importorskip("ray")

SANDBOXED = ["--scaffold", "terminal", "--model", "tiny-extended", "tiers=easy"]
"""A scaffold whose episodes run in bubblewrap sandboxes of the tool server (the calculator and search need none)."""
ACTORS = ["ray.rollout_workers=2", "ray.tool_servers=2", "ray.worker_cpus=0.5", "ray.tool_server_cpus=0.25"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A Ray head on 127.0.0.1 with 2 CPUs and a 200 MB object store; its address."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ray_cli = Path(sys.executable).parent / "ray"
    # a throwaway cluster on loopback: no token to share between the head, the run and the test
    saved = {key: os.environ.get(key) for key in ("RAY_AUTH_MODE", "RAY_USAGE_STATS_ENABLED")}
    os.environ.update(RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    start = [str(ray_cli), "start", "--head", "--node-ip-address", "127.0.0.1", "--port", str(port)]
    start += ["--num-cpus", "2", "--object-store-memory", str(200 * 2**20), "--include-dashboard", "false"]
    subprocess.run(start, env=env, check=True, capture_output=True, timeout=120)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run([str(ray_cli), "stop", "--force"], env=env, capture_output=True, timeout=120)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def train(
    tmp_path: Path, name: str, *args: str, ray_address: str | None = None, nproc: int = 1, wait: bool = True
) -> subprocess.Popen:
    command = [sys.executable, "-m", "agentrl", "train", *(["--ray", ray_address] if ray_address else [])]
    command += [f"output_dir={tmp_path}", *SMALL, *args, "--name", name, "--nproc", str(nproc)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if wait:
        out, _ = process.communicate(timeout=900)
        assert process.returncode == 0, out[-3000:]
    return process


def metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_ray_workers_and_two_learner_actors_train_the_weights_one_process_trains(tmp_path, cluster, one_process_run):
    alone = one_process_run(*REFERENCE)
    learner = ("ray.learner_processes=2", "ray.learner_cpus=0.25")  # two ranks; rank 0 holds the workers
    train(tmp_path, "ray", *REFERENCE, *ACTORS, *learner, ray_address=cluster)
    local, on_ray = weights(alone, 2), weights(tmp_path / "ray", 2)
    assert largest_difference(local, weights(alone, 1)) > 10 * ATOL  # a step moved the weights
    assert largest_difference(local, on_ray) < ATOL
    assert mean_difference(local, on_ray) < 1e-8
    ray_run = metrics(tmp_path / "ray")
    # the same episodes, so the same rewards and held-out success
    for a, b in zip(metrics(alone), ray_run, strict=True):
        assert a["step"] == b["step"]
        for key in ("reward/mean", "eval/success", "eval/episodes"):
            if key in a:
                assert b[key] == pytest.approx(a[key]), key
    assert all(r["rollout/reissued_groups"] == 0 for r in ray_run if r["step"] > 0)
    # the workers sampled with the learner's weights: the learner's log-probs are the sampler's (a worker that
    # kept the initial weights at step 2 shows ~2e-4 here, while the rollouts' tokens may still be the same)
    assert all(abs(r["train/approx_kl_to_sampler"]) < 1e-6 for r in ray_run if r["step"] > 0)
    versions = [
        json.loads(line)["policy_version"]
        for line in (tmp_path / "ray" / "trajectories").joinpath("step_000002.jsonl").read_text().splitlines()
    ]
    assert set(versions) == {1}  # every step-2 episode was played with the weights of step 1's update


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _wait_for(condition, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_killed_worker_and_tool_server_mid_step(tmp_path, cluster):
    name = "killed"
    run = train(
        tmp_path,
        name,
        *("trainer.steps=3", "eval.every_steps=1", "eval.max_tasks=8", *SANDBOXED, *ACTORS),
        "ray.namespace=killtest",
        ray_address=cluster,
        wait=False,
    )
    ray.init(address=cluster, namespace="killtest", logging_level="ERROR")
    try:
        worker = _wait_for(lambda: _actor(f"{name}/rollout-0"), 300, "the rollout worker")
        tools = _actor(f"{name}/tools-0")
        server_pid = ray.get(tools.pid.remote())
        # a training step past the first, with episodes in flight on the worker and sandboxes on the tool server
        sandboxes = _wait_for(
            lambda: ray.get(worker.busy.remote())["step"] >= 2 and _descendants(server_pid),
            300,
            "a training step with sandboxes running",
        )
        ray.kill(worker, no_restart=False)
        ray.kill(tools, no_restart=False)
        _wait_for(lambda: not any(_alive(pid) for pid in sandboxes | {server_pid}), 30, "the sandboxes to end")
        out, _ = run.communicate(timeout=900)
        assert run.returncode == 0, out[-3000:]
    finally:
        if run.poll() is None:
            run.kill()
        ray.shutdown()
    records = metrics(tmp_path / name)
    assert [r["step"] for r in records] == [0, 1, 2, 3]
    assert sum(r["rollout/reissued_groups"] for r in records if r["step"] > 0) >= 1
    assert all("eval/success" in r and r["eval/episodes"] > 0 for r in records)
    for step in (1, 2, 3):
        path = tmp_path / name / "trajectories" / f"step_{step:06d}.jsonl"
        trajectories = [json.loads(line) for line in path.read_text().splitlines()]
        assert len({t["group_id"] for t in trajectories}) == 4  # every group played (re-issued, not lost)
        for t in trajectories:
            if t["stop_reason"] == "infra_error":
                assert t["reward"] is None  # an infrastructure failure is never a zero reward


def _actor(name: str):
    try:
        return ray.get_actor(name)
    except ValueError:
        return None


def test_ray_workers_sample_from_inference_servers_the_trainer_updates(tmp_path, cluster):
    """`policy.backend=openai`: the workers are clients of an `agentrl serve` process, whose weights the trainer
    pushes after each update; the workers only learn the version."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "agentrl", "serve", "--model", "tiny", "--device", "cpu", "--port", str(port)]
    env = {**os.environ, "AGENTRL_WEIGHTS_TOKEN": "ray-test-token", "OMP_NUM_THREADS": "1"}
    server = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _wait_for(lambda: _answers(f"http://127.0.0.1:{port}/health"), 120, "agentrl serve")
        served = (
            "policy.backend=openai",
            f"policy.base_url=http://127.0.0.1:{port}/v1",
            "policy.weight_sync_token=ray-test-token",
            "trainer.steps=2",
        )
        train(tmp_path, "served", *served, *ACTORS, "ray.tool_servers=0", ray_address=cluster)
    finally:
        server.terminate()
        server.wait(timeout=30)
    records = metrics(tmp_path / "served")
    assert [r["step"] for r in records] == [1, 2]
    # step 2 was sampled by the server holding the weights of step 1's update, and stamped so
    assert abs(records[1]["train/approx_kl_to_sampler"]) < 1e-5, records[1]["train/approx_kl_to_sampler"]
    lines = (tmp_path / "served" / "trajectories" / "step_000002.jsonl").read_text().splitlines()
    assert {json.loads(line)["policy_version"] for line in lines} == {1}


def _answers(url: str) -> bool:
    import httpx

    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False
