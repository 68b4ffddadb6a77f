"""The vLLM backend: what can be checked without vLLM (conversion of its outputs, weight buckets), and a real
engine run where vLLM and a GPU are present."""

import math
import sys
from types import SimpleNamespace

import pytest
import torch

from agentrl.policy import vllm_policy
from agentrl.policy.vllm_policy import completion_from_output, topk_entropy

pytestmark = pytest.mark.unit


def test_importing_the_backend_does_not_import_vllm():
    # this module imported the backend above; vLLM (seconds to import, absent on CPU machines) must not follow
    assert "vllm" not in sys.modules


def test_topk_entropy_of_a_uniform_top_k():
    assert topk_entropy([math.log(0.25)] * 4) == pytest.approx(math.log(4))
    assert topk_entropy([0.0, -math.inf]) == 0.0


def _entry(lp):
    return SimpleNamespace(logprob=lp)


def test_completion_keeps_sampled_ids_and_their_logprobs(tiny_tokenizer):
    eos = tiny_tokenizer.convert_tokens_to_ids(tiny_tokenizer.eos_token)
    ids = tiny_tokenizer("hello world", add_special_tokens=False)["input_ids"] + [eos]
    tables = [{tok: _entry(-0.1), tok + 1: _entry(-2.5)} for tok in ids]
    output = SimpleNamespace(token_ids=ids, logprobs=tables, finish_reason="stop")
    completion = completion_from_output(output, {eos}, tiny_tokenizer.decode)
    assert completion.token_ids == tuple(ids) and completion.finish_reason == "stop"
    assert completion.logprobs == pytest.approx([-0.1] * len(ids))
    assert completion.entropies[0] == pytest.approx(topk_entropy([-0.1, -2.5]))
    assert completion.text == "hello world"
    cut = completion_from_output(
        SimpleNamespace(token_ids=ids[:2], logprobs=tables[:2], finish_reason="length"), {eos}, tiny_tokenizer.decode
    )
    assert cut.finish_reason == "length"
    stopped = completion_from_output(
        SimpleNamespace(token_ids=ids[:2], logprobs=None, finish_reason="stop"), {eos}, tiny_tokenizer.decode
    )
    assert stopped.finish_reason == "tool_call" and stopped.logprobs == (0.0, 0.0)


def test_weights_travel_in_bounded_buckets(monkeypatch):
    monkeypatch.setattr(vllm_policy, "BUCKET_BYTES", 1000)
    tensors = [(f"w{i}", torch.zeros(100)) for i in range(7)]  # 400 bytes each
    buckets = list(vllm_policy._buckets(tensors))
    assert [len(b) for b in buckets] == [3, 3, 1]
    assert [name for b in buckets for name, _ in b] == [f"w{i}" for i in range(7)]


@pytest.mark.slow
async def test_engine_samples_token_ids_and_takes_new_weights(tiny_tokenizer):
    pytest.importorskip("vllm")
    if not torch.cuda.is_available():
        pytest.skip("vLLM needs a GPU")
    from transformers import AutoModelForCausalLM

    from agentrl.policy import resolve_model_path
    from agentrl.protocols import SamplingParams

    path = resolve_model_path("tiny")
    learner = AutoModelForCausalLM.from_pretrained(path).cuda()
    policy = vllm_policy.VLLMPolicy(path, tiny_tokenizer, source_model=learner, gpu_memory_utilization=0.2)
    prompt = tiny_tokenizer("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")["input_ids"]
    greedy = SamplingParams(max_new_tokens=16, temperature=0.0)
    before = await policy.generate(prompt, greedy)
    assert before.token_ids and len(before.logprobs) == len(before.token_ids)
    with torch.no_grad():
        for p in learner.parameters():
            p.mul_(0.0)
    await policy.update_weights(learner.state_dict().items())
    after = await policy.generate(prompt, greedy)
    assert after.token_ids != before.token_ids  # zeroed weights: the engine really took them
    await policy.aclose()


def test_the_vllm_backend_without_vllm_is_a_clear_dependency_error() -> None:
    import importlib.util

    from agentrl.config import load_config
    from agentrl.errors import DependencyError
    from agentrl.policy import build_policy

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed")
    config = load_config(None, ["policy.backend=vllm"])
    with pytest.raises(DependencyError, match=r"agentrl\[vllm\]"):
        build_policy(config.policy, None, None)
