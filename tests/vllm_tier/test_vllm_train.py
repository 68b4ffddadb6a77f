"""`agentrl train policy.backend=vllm` on the code scaffold: ten real steps with vLLM's engine sampling and the
learner's weights loaded into it after each, held-out success rising, the sampler–learner gap logged every step and
small, no infrastructure failure; then `--resume` loads the checkpoint's weights into a fresh engine before its
first collect."""

from __future__ import annotations

import json

import pytest
import torch

pytestmark = pytest.mark.vllm
pytest.importorskip("vllm", reason="the vllm tier runs in the vLLM environment (scripts/setup_vllm.sh)")

from test_vllm_engine import chat_prompt, gap, run_all  # noqa: E402

from agentrl.config import load_config  # noqa: E402
from agentrl.trainer import Trainer  # noqa: E402

STEPS = 10
RUN = [
    "scaffold=code",
    "policy.backend=vllm",
    "policy.vllm.max_model_len=1024",
    "policy.vllm.enforce_eager=true",
    f"trainer.steps={STEPS}",
    f"eval.every_steps={STEPS}",
    "eval.max_tasks=64",
    "progress=false",
    "tensorboard=false",
]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("run")
    Trainer(load_config(None, RUN), run_dir).run()
    return run_dir


def metrics(run_dir) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_ten_steps_raise_held_out_success_with_a_small_sampler_gap_and_no_infra_error(run_dir):
    lines = metrics(run_dir)
    steps = [m for m in lines if m["step"] >= 1]
    keys = ("eval/success", "eval/infra_errors", "infra_failures", "train/sampler_logprob_abs_diff")
    print([{"step": m["step"], **{k: m[k] for k in keys if k in m}} for m in lines])  # shown when a check fails
    assert [m["step"] for m in steps] == list(range(1, STEPS + 1))
    evaluations = {m["step"]: m for m in lines if "eval/success" in m}
    assert evaluations[STEPS]["eval/success"] > evaluations[0]["eval/success"]
    assert all(m["eval/infra_errors"] == 0 for m in evaluations.values())
    assert all(m["infra_failures"] == 0 for m in steps)
    # the engine and the learner both compute in float32: the gap is rounding, every step
    assert all(m["train/sampler_logprob_abs_diff"] < 1e-3 for m in steps)


def test_resume_loads_the_checkpoints_weights_into_the_engine_before_the_first_collect(run_dir, tiny_tokenizer):
    from transformers import AutoModelForCausalLM

    from agentrl.policy import resolve_model_path
    from agentrl.protocols import SamplingParams

    trainer = Trainer.from_run_dir(run_dir, [f"trainer.steps={STEPS + 1}"])
    try:
        prompt = chat_prompt(tiny_tokenizer)
        params = SamplingParams(max_new_tokens=24)
        completions = run_all(trainer.loop, [trainer.policy.generate(prompt, params) for _ in range(6)])
        assert trainer.policy.version == STEPS
        assert gap(trainer.model, prompt, completions) < 1e-3  # the checkpoint's weights, not the initial ones
        initial = AutoModelForCausalLM.from_pretrained(resolve_model_path("tiny"), dtype=torch.float32)
        assert gap(initial, prompt, completions) > 1e-3
    finally:
        trainer.close()
