"""The vLLM backend: what can be checked without vLLM (conversion of its outputs, engine arguments, the end-of-turn
ids, weight files and their loading by the worker extension, what the policy sends the engine). The test doubles of
vLLM's engine and worker here are held to vLLM's real signatures by `test_vllm_signatures.py`; the real engine runs
in the `vllm` tier (`tests/vllm_tier/`)."""

import asyncio
import glob
import importlib
import math
import os
import sys
import tempfile
from types import SimpleNamespace

import pytest
import torch

from agentrl.policy import vllm_policy
from agentrl.policy.config import PolicyConfig, VLLMConfig
from agentrl.policy.vllm_policy import VLLMPolicy, completion_from_output, topk_entropy
from agentrl.policy.vllm_worker import (
    ENGINE_INFO,
    EXTENSION,
    LOAD_WEIGHTS,
    SHARED_MEMORY,
    WeightFiles,
    WeightLoadingExtension,
)

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
    tensors = [(f"model.layers.{i}.mlp.weight", torch.zeros(100)) for i in range(7)]  # 400 bytes each
    buckets = list(vllm_policy._buckets(tensors))
    assert [len(b) for b in buckets] == [3, 3, 1]
    assert [name for b in buckets for name, _ in b] == [name for name, _ in tensors]
    # vLLM reloads a layer from one file: a bucket closes only where a layer ends
    layered = [(f"model.layers.{i}.self_attn.{p}.weight", torch.zeros(100)) for i in range(3) for p in "qkvo"]
    split = [[name.split(".")[2] for name, _ in b] for b in vllm_policy._buckets(layered)]
    assert split == [["0"] * 4, ["1"] * 4, ["2"] * 4]


def test_the_vllm_backend_without_vllm_is_a_clear_dependency_error(tiny_tokenizer) -> None:
    import importlib.util

    from agentrl.config import load_config
    from agentrl.errors import DependencyError
    from agentrl.policy import build_policy

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed")
    config = load_config(None, ["policy.backend=vllm"])
    with pytest.raises(DependencyError, match=r"agentrl\[vllm\]"):
        build_policy(config.policy, None, tiny_tokenizer)


# --- engine arguments and end-of-turn ids -----------------------------------------------------------------


def test_engine_arguments_come_from_the_policy_config(tiny_tokenizer):
    from agentrl.policy import resolve_model_path

    settings = VLLMConfig(gpu_memory_utilization=0.3, tensor_parallel_size=2, max_model_len=4096, enforce_eager=True)
    kwargs = VLLMPolicy.from_config(PolicyConfig(vllm=settings), tiny_tokenizer).engine_kwargs
    module, _, name = kwargs["worker_extension_cls"].rpartition(".")
    assert getattr(importlib.import_module(module), name) is WeightLoadingExtension
    assert kwargs["model"] == resolve_model_path("tiny")
    assert (kwargs["gpu_memory_utilization"], kwargs["tensor_parallel_size"]) == (0.3, 2)
    assert "gpu_memory_utilization" not in VLLMPolicy.from_config(PolicyConfig(), tiny_tokenizer).engine_kwargs
    assert (kwargs["max_model_len"], kwargs["enforce_eager"]) == (4096, True)
    assert "enable_sleep_mode" not in kwargs  # sleep mode changes vLLM's allocator: only when asked for
    default = VLLMPolicy.from_config(PolicyConfig(), tiny_tokenizer).engine_kwargs
    assert "max_model_len" not in default and default["worker_extension_cls"] == EXTENSION
    sleepy = VLLMPolicy.from_config(PolicyConfig(vllm=VLLMConfig(sleep_between_steps=True)), tiny_tokenizer)
    assert sleepy.engine_kwargs["enable_sleep_mode"] is True
    if importlib.util.find_spec("vllm") is not None:  # the names are vLLM's own engine arguments
        import dataclasses

        from vllm import AsyncEngineArgs

        assert set(kwargs) <= {f.name for f in dataclasses.fields(AsyncEngineArgs)}


def test_every_eos_id_of_the_generation_config_ends_a_turn(tiny_tokenizer, tmp_path):
    from transformers import GenerationConfig

    im_end, endoftext = tiny_tokenizer.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])
    GenerationConfig(eos_token_id=[im_end, endoftext]).save_pretrained(tmp_path)
    policy = VLLMPolicy(str(tmp_path), tiny_tokenizer)
    assert policy.eos_token_ids == {im_end, endoftext}
    ids = tiny_tokenizer("hello", add_special_tokens=False)["input_ids"] + [endoftext]
    output = SimpleNamespace(token_ids=ids, logprobs=None, finish_reason="stop")
    completion = completion_from_output(output, policy.eos_token_ids, tiny_tokenizer.decode)
    assert completion.finish_reason == "stop" and completion.text == "hello"
    (tmp_path / "bare").mkdir()  # no generation_config.json: the tokenizer's EOS alone
    assert VLLMPolicy(str(tmp_path / "bare"), tiny_tokenizer).eos_token_ids == {im_end}
    given = VLLMPolicy(str(tmp_path), tiny_tokenizer, eos_token_ids=(im_end,))  # build_policy's chat settings
    assert given.eos_token_ids == {im_end}


# --- weights: the worker extension and what the policy sends ----------------------------------------------


def _tiny_model(seed: int, dtype: torch.dtype = torch.float32):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        tie_word_embeddings=True,  # tied tensors share storage: the weight files must still be written
    )
    return Qwen2ForCausalLM(config).to(dtype)


class ServedModel(torch.nn.Module):
    """Stands in for vLLM's model (`model_runner.model`): a transformers model behind vLLM's `load_weights(weights)`
    interface, which copies each named full tensor into the parameter of that name."""

    def __init__(self, seed: int) -> None:
        super().__init__()
        self.hf = _tiny_model(seed, torch.bfloat16)
        self.received: list[tuple[str, torch.dtype]] = []

    def load_weights(self, weights):
        params = self.hf.state_dict()
        with torch.no_grad():
            for name, tensor in weights:
                self.received.append((name, tensor.dtype))
                params[name].copy_(tensor)


class Worker(WeightLoadingExtension):
    """Stands in for vLLM's worker class with the extension mixed in: the attributes the extension reads, and the
    worker's in-place reload (`GPUModelRunner.reload_weights`'s parameters), which hands the tensors to the model's
    `load_weights` as vLLM's does once it has put the layers back into checkpoint form."""

    def __init__(self, model: ServedModel, quantization: str | None = None) -> None:
        self.model_runner = SimpleNamespace(model=model)
        self.model_config = SimpleNamespace(dtype=torch.bfloat16, quantization=quantization)
        self.reloads = 0

    def reload_weights(self, weights_iterator=None, weights_path=None, is_checkpoint_format=True):
        assert weights_path is None and is_checkpoint_format
        self.reloads += 1
        self.model_runner.model.load_weights(weights_iterator)


def _serves(worker: Worker, learner) -> bool:
    served = worker.model_runner.model.hf.state_dict()
    return all(torch.equal(served[name], t.to(torch.bfloat16)) for name, t in learner.state_dict().items())


def test_extension_names_cannot_collide_with_vllm_worker_attributes():
    # vLLM refuses an extension that has an attribute its worker class already has
    names = [a for a in dir(WeightLoadingExtension) if not a.startswith("__")]
    assert {LOAD_WEIGHTS, ENGINE_INFO} <= set(names) and all(a.startswith("agentrl_") for a in names)


def test_worker_loads_each_file_in_its_dtype_and_the_files_go_away(monkeypatch, tmp_path):
    monkeypatch.setattr(vllm_policy, "BUCKET_BYTES", 10_000)  # several files
    learner, worker = _tiny_model(0), Worker(ServedModel(seed=1))
    from safetensors.torch import load_file

    assert not _serves(worker, learner) and worker.agentrl_engine_info() == {"dtype": "bfloat16", "quantization": None}
    with WeightFiles(vllm_policy.BUCKET_BYTES, root=str(tmp_path)) as files:
        buckets = list(vllm_policy._buckets(learner.state_dict().items()))
        assert len(buckets) > 1
        for bucket in buckets:
            with files.bucket(bucket) as path:  # float32 files: the worker casts to the model's dtype
                assert os.path.dirname(path) == files.directory
                assert worker.agentrl_load_weights(path) == len(bucket)
            assert not os.path.exists(path)
        assert _serves(worker, learner) and worker.reloads == len(buckets)  # through vLLM's reload, every file
        with torch.no_grad():
            for p in learner.parameters():
                p.add_(0.5)
        with files.bucket(learner.state_dict().items()) as path:  # one file: tied tensors, uncast, side by side
            worker.agentrl_load_weights(path)
        with files.bucket([("w", torch.ones(2))], torch.bfloat16) as path:  # the learner casts to the engine's dtype
            assert load_file(path)["w"].dtype == torch.bfloat16
    assert _serves(worker, learner)
    assert {dtype for _, dtype in worker.model_runner.model.received} == {torch.bfloat16}
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(KeyError), WeightFiles(1000, root=str(tmp_path)) as files:  # a worker fails: files go anyway
        with files.bucket([("no.such.weight", torch.zeros(3))]) as path:
            worker.agentrl_load_weights(path)
    assert list(tmp_path.iterdir()) == []


class RecordingEngine:
    """Stands in for vLLM's async engine (`AsyncLLM`): `collective_rpc` calls the named method on every worker, as
    vLLM's executor does, and every call the policy makes is recorded."""

    def __init__(self, engine_kwargs, workers) -> None:
        self.engine_kwargs, self.workers, self.calls = engine_kwargs, workers, []

    async def collective_rpc(self, method, timeout=None, args=(), kwargs: dict | None = None):
        self.calls.append(("collective_rpc", method, args, kwargs))
        return [getattr(worker, method)(*args, **(kwargs or {})) for worker in self.workers]

    async def reset_prefix_cache(self, reset_running_requests=False, reset_connector=False):
        self.calls.append(("reset_prefix_cache",))
        return True

    async def sleep(self, level=1, mode="abort"):
        self.calls.append(("sleep", level))

    async def wake_up(self, tags=None):
        self.calls.append(("wake_up",))

    def shutdown(self, timeout=None):
        self.calls.append(("shutdown",))


def _plain(value) -> bool:
    """Data that crosses vLLM's process boundaries without pickling: no callables, no tensors."""
    if isinstance(value, str | int | float | bool | None):
        return True
    if isinstance(value, list | tuple):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False


def _staged() -> set[str]:
    return {p for root in (SHARED_MEMORY, tempfile.gettempdir()) for p in glob.glob(f"{root}/agentrl-weights-*")}


def test_weight_updates_reach_every_worker_by_method_name_alone(monkeypatch, tiny_tokenizer, tmp_path):
    monkeypatch.setattr(vllm_policy, "BUCKET_BYTES", 10_000)
    learner = _tiny_model(0)
    workers = [Worker(ServedModel(seed=1)), Worker(ServedModel(seed=2))]  # tensor parallel: each loads every file
    engines: list[RecordingEngine] = []
    settings = VLLMConfig(tensor_parallel_size=2, sleep_between_steps=True)
    policy = VLLMPolicy(
        str(tmp_path),
        tiny_tokenizer,
        source_model=learner,
        settings=settings,
        engine_factory=lambda kwargs: engines.append(RecordingEngine(kwargs, workers)) or engines[-1],
    )
    staged_before = _staged()
    policy.refresh_weights()  # --resume before the engine exists: noted, sent when it starts
    assert engines == [] and policy.version == 0
    loop = asyncio.new_event_loop()  # the trainer's loop: the policy's synchronous methods run on it
    try:
        loop.run_until_complete(policy.start())
        (engine,) = engines
        assert engine.engine_kwargs["worker_extension_cls"] == EXTENSION
        assert all(_serves(w, learner) for w in workers)
        for step in (1, 2):
            policy.release_memory()  # before the learner's update
            with torch.no_grad():
                for p in learner.parameters():
                    p.add_(0.5)
            if step == 2:
                policy.reclaim_memory()  # before the next collect
                assert engine.calls[-2:] == [("wake_up",), ("reset_prefix_cache",)]
            policy.sync_weights()
            assert policy.version == step and all(_serves(w, learner) for w in workers)
        policy.refresh_weights()
        assert policy.version == 2
        loop.run_until_complete(policy.aclose())
    finally:
        loop.close()
    rpcs = [call for call in engine.calls if call[0] == "collective_rpc"]
    assert all(isinstance(method, str) and _plain(args) and _plain(kwargs) for _, method, args, kwargs in rpcs)
    sequence = [call[1] if call[0] == "collective_rpc" else call[0] for call in engine.calls]
    sequence = [c for i, c in enumerate(sequence) if i == 0 or c != sequence[i - 1]]  # one entry per run of loads
    push = [LOAD_WEIGHTS, "reset_prefix_cache"]
    wake = ["sleep", "wake_up", "reset_prefix_cache"]
    assert sequence == [ENGINE_INFO, *push, *wake, *push, *wake, *push, *push, "shutdown"]
    assert _staged() == staged_before
