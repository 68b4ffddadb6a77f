"""What runs before a vLLM engine or server is used: the backend `auto` picks, the GPU share beside the learner,
the checks of the installed vLLM and its companions, TRL's version rule, the mapping of vLLM's failures to
`SamplerError`, and the merged LoRA weights an engine reloads."""

from __future__ import annotations

import copy
import importlib.util
import sys
from types import SimpleNamespace

import pytest
import torch

from agentrl.errors import ConfigError, DependencyError, SamplerError
from agentrl.policy.config import PolicyConfig
from agentrl.policy.vllm_environment import check_gpu_companions, check_trl_server, release
from agentrl.policy.vllm_memory import GIB, engine_memory_share
from agentrl.policy.vllm_policy import completion_from_output, sampler_error

pytestmark = pytest.mark.unit


def test_auto_picks_the_transformers_sampler_without_vllm_and_says_why(tiny_tokenizer):
    from agentrl.policy.backends import build_policy, choose_backend

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed")
    assert choose_backend(PolicyConfig()) == ("transformers", "policy.backend=auto: vLLM is not installed")
    assert choose_backend(PolicyConfig(backend="vllm"))[0] == "vllm"
    from transformers import AutoModelForCausalLM

    from agentrl.policy import resolve_model_path

    model = AutoModelForCausalLM.from_pretrained(resolve_model_path("tiny"))
    policy = build_policy(PolicyConfig(), model, tiny_tokenizer)
    assert type(policy).__name__ == "TransformersPolicy"
    assert policy.backend_note == "sampler: transformers (policy.backend=auto: vLLM is not installed)"


def test_the_engine_takes_what_is_free_beside_the_learners_update():
    total, free, params = 80 * GIB, 60 * GIB, 1_000_000_000  # a 1B learner's weights already loaded
    awake = engine_memory_share(total, free, params, sleeps=False, requested=None)
    # 12 bytes a parameter (gradients, AdamW) and 10% of the device for activations stay free, and a margin
    assert awake == pytest.approx((free - 12 * params - 0.1 * total - GIB / 2) / total, abs=1e-3)
    asleep = engine_memory_share(total, free, params, sleeps=True, requested=None)
    assert asleep == pytest.approx((free - 8 * params - GIB / 2) / total, abs=1e-3) and asleep > awake
    assert engine_memory_share(total, free, params, sleeps=False, requested=0.5) == 0.5  # it fits: as asked


def test_a_share_that_cannot_fit_is_one_line_naming_the_setting():
    total = 80 * GIB
    with pytest.raises(ConfigError, match=r"gpu_memory_utilization=0.9 asks for 72.0 GiB but 30.0 GiB"):
        engine_memory_share(total, 30 * GIB, 10**9, sleeps=False, requested=0.9)
    with pytest.raises(ConfigError, match=r"cannot fit beside the learner.*sleep_between_steps=true"):
        engine_memory_share(total, 20 * GIB, 10**9, sleeps=False, requested=None)  # a 7B learner's free memory


def test_release_numbers_and_trls_version_rule():
    assert release("0.32.0+cpu") == (0, 32, 0) and release("0.31.0rc1") == (0, 31, 0)
    check_trl_server("0.31.0", "0.31.1")  # one release on both sides, inside TRL's range
    with pytest.raises(ConfigError, match=r"the trainer has vLLM 0.30.0 and the `trl vllm-serve` server 0.31.0"):
        check_trl_server("0.31.0", "0.30.0")
    with pytest.raises(ConfigError, match=r"the server has vLLM 0.32.0"):
        check_trl_server("0.32.0", "0.31.0")
    with pytest.raises(DependencyError, match=r"vllm>=0.22,<=0.31"):
        check_trl_server("0.31.0", None)


@pytest.fixture
def broken_torchvision(tmp_path, monkeypatch):
    """A torchvision that fails to import as PyPI's CUDA build does beside the CPU torch."""
    broken = tmp_path / "torchvision"
    broken.mkdir()
    (broken / "__init__.py").write_text('raise RuntimeError("operator torchvision::nms does not exist")\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "torchvision", raising=False)


def test_a_companion_built_for_another_torch_is_one_line(broken_torchvision):
    with pytest.raises(DependencyError, match=r"torchvision does not load beside torch .*pip uninstall -y torchvision"):
        check_gpu_companions()


def test_doctor_names_the_broken_companion_before_loading_weights(broken_torchvision):
    from agentrl.doctor.model_doctor import doctor

    last = doctor(PolicyConfig())[-1]
    assert (last.check, last.status) == ("torch companions", "fail")
    assert "nms does not exist" in last.detail and last.fix.startswith("pip uninstall -y torchvision")


class EngineDeadError(Exception):
    """The name of vLLM's exception for an engine that died (`vllm.v1.engine.exceptions`)."""


def test_vllm_failures_become_sampler_errors_in_one_line():
    dead = sampler_error(EngineDeadError("EngineCore encountered an issue."), 10, 512)
    assert str(dead).startswith("the vLLM engine died (EngineCore encountered an issue.)")
    vllm_text = "The decoder prompt (length 600) is longer than the maximum model length of 512. Make sure"
    long = sampler_error(ValueError(vllm_text), 600, None)
    assert "600 tokens and the vLLM engine serves at most 512 (policy.vllm.max_model_len" in str(long)
    assert str(sampler_error(TypeError("bad"), 3, 512)) == "vLLM refused the request: bad"
    assert isinstance(sampler_error(RuntimeError("x"), 3, None), SamplerError)


def test_an_aborted_request_is_no_tool_call():
    output = SimpleNamespace(token_ids=[5, 6], logprobs=None, finish_reason="abort")
    with pytest.raises(SamplerError, match="aborted"):
        completion_from_output(output, {2}, lambda ids, **_: "")


def test_merged_lora_weights_are_the_merged_models_without_a_copy(monkeypatch):
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from agentrl.policy.learner_weights import merged_named_weights

    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1,
    )  # fmt: skip
    model = get_peft_model(
        Qwen2ForCausalLM(config), LoraConfig(r=4, target_modules=["q_proj", "v_proj"], modules_to_save=["lm_head"])
    )
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name or "modules_to_save" in name:
                p.normal_()
    expected = copy.deepcopy(model).merge_and_unload().state_dict()
    monkeypatch.setattr(copy, "deepcopy", lambda *a, **k: pytest.fail("copied the model"))
    merged = dict(merged_named_weights(model))
    assert set(merged) == set(expected)
    assert all(torch.allclose(merged[n], t, atol=1e-6) for n, t in expected.items())


def test_the_engine_computes_in_the_learners_dtype():
    from agentrl.policy.backends import engine_dtype
    from agentrl.policy.config import VLLMConfig

    # vLLM alone would run a float32 checkpoint in 16 bits, and its log-probs would not be the learner's
    assert engine_dtype(PolicyConfig(), None, "fp32") == "float32"
    assert engine_dtype(PolicyConfig(), None, "bf16-mixed") == "bfloat16"
    assert engine_dtype(PolicyConfig(vllm=VLLMConfig(dtype="float16")), None, "fp32") == "float16"
    assert engine_dtype(PolicyConfig(), torch.nn.Linear(2, 2).to(torch.bfloat16), None) == "bfloat16"
