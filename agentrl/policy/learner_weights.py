"""The learner's weights as a sampler takes them: under the served (base) model's names, a LoRA model's merged.

`learner_weights(model)` is what a weight update sends: the parameters the learner changes. A full fine-tune sends
every trainable parameter. A LoRA model (peft) sends, for each adapted module, its merged weight W + (α/r)·BA,
computed aside (merging into the learner's own weights and unmerging again would drift them by rounding every
step), plus any other trainable parameter (`modules_to_save`, biases) under its base name. So only the modules LoRA
adapts travel, as plain weights a server loads without knowing about adapters.

`merged_named_weights(model)` is every weight of the served model, one tensor at a time: what an engine that reloads
whole layers needs (vLLM in-process, `vllm_policy.py`; `vllm serve`'s reload, `vllm_reload_client.py`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any


def learner_weights(model: Any) -> dict[str, Any]:
    """The learner's changing parameters under the served (base) model's names, detached."""
    import torch

    with torch.no_grad():
        if not (hasattr(model, "peft_config") and hasattr(model, "get_base_model")):
            return {n: p.detach() for n, p in model.named_parameters() if p.requires_grad}
        return _merged_lora_weights(model)


def _merged_lora_weights(model: Any) -> dict[str, Any]:
    from peft.tuners.lora import LoraLayer

    base = model.get_base_model()
    out: dict[str, Any] = {}
    layers = [(name, m) for name, m in base.named_modules() if isinstance(m, LoraLayer)]
    if not layers or any(m.use_dora.get(a) for _, m in layers for a in m.active_adapters):
        return _merged_copy_weights(model)  # another peft method, or DoRA: not W + BA
    for name, module in layers:
        weight = module.get_base_layer().weight.detach()
        if not module.merged:
            for adapter in module.active_adapters:
                if adapter in module.lora_A:
                    weight = weight + module.get_delta_weight(adapter)
        out[f"{name}.weight"] = weight
    for name, p in base.named_parameters():
        if p.requires_grad and ".lora_" not in name:
            out[_base_name(name)] = p.detach()
    return out


def merged_named_weights(model: Any) -> Iterator[tuple[str, Any]]:
    """Every weight of the served (base) model, one tensor at a time, as a checkpoint of the learner would hold it:
    a plain model's state dict; a LoRA model's base weights with each adapted module's W + (α/r)·BA computed as it is
    yielded (never a copy of the whole model), `modules_to_save` under their base names. What an engine that reloads
    whole layers needs: every tensor of each layer, not only the adapted ones. DoRA and other peft methods are merged
    in a copy (`merge_and_unload`)."""
    import torch

    if not (hasattr(model, "peft_config") and hasattr(model, "get_base_model")):
        yield from model.state_dict().items()
        return
    from peft.tuners.lora import LoraLayer

    base = model.get_base_model()
    layers = {name: m for name, m in base.named_modules() if isinstance(m, LoraLayer)}
    if not layers or any(m.use_dora.get(a) for m in layers.values() for a in m.active_adapters):
        yield from _merged_copy_weights(model).items()
        return
    with torch.no_grad():
        for name, tensor in base.state_dict().items():
            if ".lora_" in name or ".original_module." in name:  # adapters; what modules_to_save replaced
                continue
            module, _, leaf = name.rpartition(".")
            owner = module.removesuffix(".base_layer")
            if module.endswith(".base_layer") and owner in layers and leaf == "weight":
                lora = layers[owner]
                if not lora.merged:
                    for adapter in lora.active_adapters:
                        if adapter in lora.lora_A:
                            tensor = tensor + lora.get_delta_weight(adapter)
                yield f"{owner}.weight", tensor
            else:
                yield _base_name(name), tensor


def _merged_copy_weights(model: Any) -> dict[str, Any]:
    import copy

    merged = copy.deepcopy(model).merge_and_unload()
    return {n: p.detach() for n, p in merged.named_parameters()}


def _base_name(peft_name: str) -> str:
    """`lm_head.modules_to_save.default.weight` → `lm_head.weight`; `q_proj.base_layer.bias` → `q_proj.bias`."""
    return re.sub(r"\.modules_to_save\.[^.]+", "", peft_name).replace(".base_layer", "")
