"""agentrl's calls into vLLM, and the test doubles of vLLM in `test_vllm_policy.py`, against a snapshot of the pinned
vLLM's own signatures (`vllm_signatures.json`, written by `scripts/vllm_signatures.py` in the vLLM environment), so
the fast tier catches a call vLLM would refuse without installing vLLM."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

from agentrl.policy import vllm_worker
from agentrl.policy.config import VLLMConfig
from agentrl.policy.vllm_engine import engine_arguments
from agentrl.policy.vllm_environment import VLLM_RANGE, release
from agentrl.policy.vllm_policy import sampling_arguments
from agentrl.protocols import SamplingParams

pytestmark = pytest.mark.unit

SNAPSHOT = json.loads((Path(__file__).parent / "vllm_signatures.json").read_text())
ASYNC_LLM = SNAPSHOT["methods"]["vllm.v1.engine.async_llm.AsyncLLM"]
RUNNER_RELOAD = SNAPSHOT["methods"]["vllm.v1.worker.gpu_model_runner.GPUModelRunner"]["reload_weights"]
FIELDS = SNAPSHOT["fields"]


def _parameters(function) -> list[str]:
    return [p for p in inspect.signature(function).parameters if p not in ("self", "cls")]


def test_the_snapshot_is_of_a_vllm_inside_the_supported_range():
    low, high = (release(v) for v in VLLM_RANGE)
    assert low <= release(SNAPSHOT["vllm_version"]) < high


def test_engine_arguments_are_fields_of_async_engine_args():
    settings = VLLMConfig(gpu_memory_utilization=0.3, max_model_len=512, enforce_eager=True, sleep_between_steps=True)
    kwargs = engine_arguments("/model", settings, dtype="bfloat16")
    added_at_start = {"logprobs_mode", "distributed_executor_backend"}  # start_engine's own
    assert set(kwargs) | added_at_start <= set(FIELDS["vllm.AsyncEngineArgs"])


def test_sampling_arguments_are_fields_of_sampling_params():
    params = SamplingParams(max_new_tokens=8, temperature=0.7, top_p=0.9, stop=("</tool_call>",), seed=3)
    kwargs = sampling_arguments(params, {1, 2}, 5, seeds=True)
    assert set(kwargs) <= set(FIELDS["vllm.SamplingParams"])
    assert (kwargs["top_k"], kwargs["min_p"], kwargs["repetition_penalty"]) == (0, 0.0, 1.0)  # the learner's own
    assert kwargs["seed"] == 3 and sampling_arguments(params, {1}, 5, seeds=False)["seed"] is None


def test_what_agentrl_reads_of_an_output_is_there():
    assert {"token_ids", "logprobs", "finish_reason"} <= set(FIELDS["vllm.outputs.CompletionOutput"])
    assert "outputs" in FIELDS["vllm.outputs.RequestOutput"] and "logprob" in FIELDS["vllm.logprobs.Logprob"]
    assert any(e.endswith(".EngineDeadError") for e in SNAPSHOT["exceptions"])  # sampler_error names it


def test_the_engine_double_has_the_engines_signatures():
    from test_vllm_policy import RecordingEngine

    for method in ("collective_rpc", "reset_prefix_cache", "sleep", "wake_up", "shutdown"):
        assert _parameters(getattr(RecordingEngine, method)) == ASYNC_LLM[method], method
    assert ASYNC_LLM["generate"][:3] == ["prompt", "sampling_params", "request_id"]  # generate's positional call


def test_the_worker_double_reloads_as_vllms_worker_does():
    from test_vllm_policy import Worker

    assert _parameters(Worker.reload_weights) == RUNNER_RELOAD
    assert "reload_weights" in SNAPSHOT["worker_attributes"]  # what the extension calls on the real worker
    # vLLM refuses an extension with an attribute its worker already has
    ours = {a for a in dir(vllm_worker.WeightLoadingExtension) if not a.startswith("__")}
    assert not ours & set(SNAPSHOT["worker_attributes"])


async def test_the_served_engine_takes_what_the_openai_backend_sends(tiny_tokenizer):
    from types import SimpleNamespace

    from agentrl.policy.openai_policy import OpenAICompletionsPolicy

    routes = set(SNAPSHOT["routes"])  # what the weight client and the checks call
    assert {"POST /collective_rpc", "POST /reset_prefix_cache", "GET /server_info", "GET /v1/models"} <= routes
    assert {"POST /v1/completions", "GET /version"} <= routes
    assert "weights_path" in RUNNER_RELOAD
    sent: dict = {}

    async def create(**request):
        sent.update(request)

    client = SimpleNamespace(completions=SimpleNamespace(create=create))
    policy = OpenAICompletionsPolicy(tiny_tokenizer, base_url="http://127.0.0.1:9/v1", model="m")
    await policy._complete(client, [1, 2, 3], SamplingParams(max_new_tokens=4, temperature=0.5, seed=1))
    extra = sent.pop("extra_body")
    fields = {**sent, **extra}
    assert set(fields) <= set(FIELDS["vllm.entrypoints.openai.completion.protocol.CompletionRequest"])
    assert (fields["top_k"], fields["min_p"], fields["repetition_penalty"]) == (-1, 0.0, 1.0)
    await policy.aclose()
