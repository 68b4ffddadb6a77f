"""`agentrl doctor` on checkpoints on disk: the shipped tiny policy and a family model pass, including the
sampler–learner agreement of a sampled episode; a checkpoint whose generation config lacks the template's
end-of-turn id fails with exit code 1 and says what to add."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from agentrl.cli import app
from agentrl.testing.families import save_family_model

pytestmark = pytest.mark.integration


def doctor(*args: str):
    return CliRunner().invoke(app, ["doctor", *args])


def test_the_tiny_policy_passes_every_check():
    result = doctor("--model", "tiny")
    assert result.exit_code == 0, result.output
    rows = {line.split()[0]: line for line in result.output.splitlines()[2:] if line.strip()}
    assert "sampler" in rows and " ok " in rows["sampler"]
    gap = float(rows["sampler"].split("mean ")[1].split(",")[0])
    assert gap < 1e-4  # token-exact: the learner scores what the sampler sampled


def test_a_missing_end_of_turn_id_fails_and_the_fixed_checkpoint_passes(tmp_path):
    path = save_family_model("qwen3", tmp_path / "qwen3")
    generation = json.loads((path / "generation_config.json").read_text())
    tokenizer_config = json.loads((path / "tokenizer_config.json").read_text())
    im_end = generation["eos_token_id"][0]
    generation["eos_token_id"] = [e for e in generation["eos_token_id"] if e != im_end]
    (path / "generation_config.json").write_text(json.dumps(generation))
    tokenizer_config["eos_token"] = "<|endoftext|>"
    (path / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    broken = doctor("--model", str(path), "--fast")
    assert broken.exit_code == 1 and f"add {im_end} to eos_token_id" in broken.output
    generation["eos_token_id"].append(im_end)
    (path / "generation_config.json").write_text(json.dumps(generation))
    fixed = doctor("--model", str(path))
    assert fixed.exit_code == 0, fixed.output
    assert "prefix            warn" in fixed.output or "warn" in fixed.output  # Qwen3 rewrites its history


def test_an_lfm2_checkpoint_passes_the_chat_checks_and_says_why_the_sampler_is_not_measured(tmp_path):
    """LFM2's pythonic calls parse; its convolution layers keep the in-process sampler out, which is a warning
    naming the backends that can sample it, not a crash."""
    result = doctor("--model", str(save_family_model("lfm2", tmp_path / "lfm2")))
    assert result.exit_code == 0, result.output
    rows = {line.split()[0]: line for line in result.output.splitlines()[2:] if line.strip() and line[0] != " "}
    assert " ok " in rows["call"] and "pythonic" in rows["tool"] and " ok " in rows["scripted"]
    assert " warn " in rows["sampler"] and "conv layers" in rows["sampler"]
