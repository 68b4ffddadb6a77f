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
