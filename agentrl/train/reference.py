"""The reference policy of the KL term: a frozen copy of the initial policy."""

from __future__ import annotations

import copy
from typing import Any

from agentrl.train.precision import cast_parameters, parameter_dtype, resolve_precision


def reference_model(model: Any, config: Any) -> Any:
    """A frozen copy of `model` for `trainer.kl_coef > 0`, or None: no KL term, or a LoRA run (whose reference is
    the base model with the adapter disabled, no copy needed). `config` is the `RunConfig`."""
    if config.trainer.kl_coef <= 0 or config.policy.lora_rank > 0:
        return None
    reference = copy.deepcopy(model).eval()
    reference.requires_grad_(False)
    trainable = [p for p in model.parameters() if p.requires_grad]
    # in the policy's compute dtype (bf16 under bf16-mixed): an fp32 copy would double its memory
    cast_parameters(reference, parameter_dtype(resolve_precision(config.trainer.precision, trainable)))
    return reference
