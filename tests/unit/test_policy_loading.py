"""Loading a policy for training: the options PolicyConfig names take effect on the real tiny checkpoint."""

import warnings

import pytest

from agentrl.config import PolicyConfig
from agentrl.policy.loading import load_model_and_tokenizer

pytestmark = pytest.mark.unit


def test_gradient_checkpointing_and_lora_wrap_the_model_without_deprecated_calls():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model, _ = load_model_and_tokenizer(
            PolicyConfig(model="tiny", gradient_checkpointing=True, lora_rank=2, lora_target_modules=("q_proj",))
        )
    base = model.get_base_model()
    checkpointing = getattr(base, "is_activation_checkpointing", None)
    assert checkpointing if checkpointing is not None else base.is_gradient_checkpointing
    assert base.config.use_cache is False
    trainable = [name for name, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in name for name in trainable)
    ours = [str(w.message) for w in caught if "checkpointing_enable" in str(w.message)]
    assert not ours, ours


def is_checkpointing(model) -> bool:
    flag = getattr(model, "is_activation_checkpointing", None)
    return flag if flag is not None else model.is_gradient_checkpointing


@pytest.mark.parametrize("explicit", [True, False, None])
def test_only_explicit_gradient_checkpointing_turns_it_on_at_load(explicit):
    # None leaves it to the learner, which decides by memory (tests/unit/test_learner_proxies.py)
    config = PolicyConfig(model="tiny", gradient_checkpointing=explicit, activation_checkpointing_above_params=1_000)
    model, _ = load_model_and_tokenizer(config)
    assert is_checkpointing(model) is bool(explicit)


def test_auto_dtype_trains_float32_weights_on_any_device():
    import torch

    # "meta" stands in for a GPU: before, auto meant bf16 on every device but the CPU
    model, _ = load_model_and_tokenizer(PolicyConfig(model="tiny", device="meta"))
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    served, _ = load_model_and_tokenizer(PolicyConfig(model="tiny", device="meta"), trainable=False)
    assert {p.dtype for p in served.parameters()} == {torch.bfloat16}


def test_recurrent_layers_are_named_and_attention_models_have_none():
    import transformers

    from agentrl.errors import ConfigError
    from agentrl.policy.loading import check_in_process_sampler, recurrent_layers

    hybrid = transformers.Lfm2Config(num_hidden_layers=3, layer_types=["conv", "full_attention", "conv"])
    assert recurrent_layers(hybrid) == ["conv"]
    assert recurrent_layers(transformers.Qwen3Config()) == []
    assert recurrent_layers(transformers.Gemma3TextConfig()) == []  # sliding and full attention
    assert recurrent_layers(transformers.MambaConfig()) == ["mamba"]
    with pytest.raises(ConfigError, match="policy.backend=vllm"):
        check_in_process_sampler(hybrid)
    check_in_process_sampler(transformers.Qwen3Config())
