"""`agentrl train` and `agentrl eval` with randomly initialised models of real architectures and their chat
templates (saved to disk, loaded by path like any checkpoint): no episode fails for template or parser reasons,
and the learner scores exactly what the sampler sampled."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from agentrl.cli import app
from agentrl.testing.families import save_family_model

pytestmark = pytest.mark.slow

FAMILIES = ("qwen2", "qwen3", "qwen3_coder", "llama3", "mistral")


@pytest.mark.parametrize("family", FAMILIES)
def test_train_and_eval_a_family_model(family, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = save_family_model(family, tmp_path / family)
    train = CliRunner().invoke(
        app,
        [
            "train",
            "--model",
            str(path),
            "--scaffold",
            "code",
            "--name",
            "run",
            "trainer.steps=1",
            "rollout.prompts_per_step=3",
            "rollout.samples_per_prompt=2",
            "rollout.max_new_tokens_per_turn=24",
            "eval.every_steps=0",
            "progress=false",
            "trainer.skip_zero_advantage_groups=false",  # a random model earns no reward: update anyway
        ],
    )
    assert train.exit_code == 0, train.output + str(train.exception)
    trajectories = [json.loads(line) for line in (tmp_path / "runs/run/trajectories/step_000001.jsonl").open()]
    assert trajectories and all(t["stop_reason"] != "infra_error" for t in trajectories), trajectories[0]["error"]
    metrics = [json.loads(line) for line in (tmp_path / "runs/run/metrics.jsonl").open()]
    assert metrics[-1]["train/sampler_logprob_abs_diff"] < 1e-4  # token-exact: same ids, same distribution
    evaluated = CliRunner().invoke(
        app, ["eval", "--model", str(path), "--scaffold", "code", "max_tasks=4", "max_new_tokens_per_turn=24"]
    )
    assert evaluated.exit_code == 0, evaluated.output + str(evaluated.exception)
    records = [json.loads(line) for line in next((tmp_path / "evals").glob("*.jsonl")).open()]
    assert len(records) == 4 and all(r["stop_reason"] != "infra_error" for r in records), records[0]["error"]


def test_the_gpu_proof_script_runs_at_a_tiny_size(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "scripts" / "gpu_proof.py"
    # bench_trl has its own test (tests/slow/test_trl_bench.py)
    parts = "learner_0.6b_4k,logprob_kernels,sampler,train,fsdp"
    done = subprocess.run(
        [sys.executable, str(script), "--quick", "--device", "cpu", "--parts", parts, "--out", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads((tmp_path / "gpu_proof.json").read_text())
    assert not [name for name in parts.split(",") if "error" in report[name]], report
    learner = report["learner_0.6b_4k"]
    assert learner["tokens_per_s"] > 0 and learner["model_flop_per_update"] > 0
    assert report["sampler"]["sampler_learner_logprob_gap"]["max"] < 1e-4  # fp32 on the CPU
    assert report["train"]["infra_failures"] == 0 and report["train"]["sampler_logprob_abs_diff"] < 1e-4
    fsdp = report["fsdp"]  # one rank of FSDP2 computes what the unsharded learner computes
    assert fsdp["largest_loss_difference"] < 1e-5 and fsdp["largest_weight_difference"] < 1e-6, fsdp
    kernels = report["logprob_kernels"]  # both log-prob kernels agree with the fp64 reference in fp32
    assert all(
        kernels[k][f"max_error_{w}"] < 1e-4
        for k in ("agentrl_chunked", "trl_fused")
        for w in ("logprobs", "grad_hidden")
    ), kernels
    assert "| sampler, 4 rows |" in (tmp_path / "gpu_proof.md").read_text()
