"""Attention confined to each sample of a packed row, for the learner's padding-free micro-batches (`packing.py`).

transformers (5.x) picks a layer's attention function by the model config's `_attn_implementation` and passes the
forward call's extra keyword arguments through to it. `enable_packing(model)` registers, beside the model's own
implementation X (`sdpa`, a flash attention, `flex_attention`), an implementation `agentrl_packed|X` that does
what X does unless the call carries `packed_segments` (the samples' lengths), and then runs X's scaled dot-product
attention causally over each sample on its own. The model is switched to it once and stays switched: calls without
the keyword (the in-process sampler, evaluation, a reference model) compute exactly what X computes, with X's own
masks, so sampling is untouched even while the learner trains; the activation-checkpointing recompute of a packed
layer finds the same function.

A packed forward passes `attention_mask` as a per-layer-type mapping of `None` masks, which the models that accept
one (Qwen2/3, Gemma 3, ...) use as it is, so transformers builds no T × T mask and makes no device sync to detect
the packing from the positions; models that do not accept one get `attention_mask=None`, and their block-diagonal
mask is built and ignored. `check_packing` verifies, once per model, on two short sequences, that packed log-probs
are those of each sample alone (and not those of the samples attending to each other); a model that fails is
trained on padded rows instead. Eager attention (no registered function to delegate to) is not packed.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

import torch

logger = logging.getLogger(__name__)

PREFIX = "agentrl_packed|"
_MASK_MAPPING = {"full_attention": None, "sliding_attention": None, "chunked_attention": None}


def enable_packing(model: torch.nn.Module) -> bool:
    """Switch `model` (every config in it) to the packing-aware wrapper of its attention; False where the model's
    attention cannot be wrapped (eager, or a function transformers does not list)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    configs = _configs(model)
    names = {config._attn_implementation for config in configs}
    if not configs or any(not isinstance(n, str) for n in names):
        return False
    for name in names - {n for n in names if n.startswith(PREFIX)}:
        if name.startswith("paged|") or name not in ALL_ATTENTION_FUNCTIONS._global_mapping:
            return False
        wrapped = PREFIX + name
        if wrapped not in ALL_ATTENTION_FUNCTIONS._global_mapping:
            AttentionInterface.register(wrapped, functools.partial(_attention, ALL_ATTENTION_FUNCTIONS[name]))
        mask = ALL_MASK_ATTENTION_FUNCTIONS._global_mapping.get(name)
        if mask is not None and wrapped not in ALL_MASK_ATTENTION_FUNCTIONS._global_mapping:
            ALL_MASK_ATTENTION_FUNCTIONS.register(wrapped, mask)
    for config in configs:
        if not config._attn_implementation.startswith(PREFIX):
            config._attn_implementation = PREFIX + config._attn_implementation
    return True


def packed_inputs(batch: Any, *, mask_mapping: bool = True) -> dict[str, Any]:
    """The keyword arguments of a packed forward pass of `batch` (a packed `MicroBatch`)."""
    return {
        "input_ids": batch.input_ids_B_T,
        "position_ids": batch.position_ids_B_T,
        "attention_mask": dict(_MASK_MAPPING) if mask_mapping else None,
        "packed_segments": batch.segments,
    }


def _configs(model: torch.nn.Module) -> list[Any]:
    found: dict[int, Any] = {}
    for module in model.modules():
        config = getattr(module, "config", None)
        if config is not None and hasattr(config, "_attn_implementation"):
            found.setdefault(id(config), config)
    return list(found.values())


def _attention(
    original: Any,
    module: torch.nn.Module,
    query_B_H_T_D: torch.Tensor,
    key_B_K_T_D: torch.Tensor,
    value_B_K_T_D: torch.Tensor,
    attention_mask: Any,
    *args: Any,
    packed_segments: tuple[int, ...] | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    if packed_segments is None:
        return original(module, query_B_H_T_D, key_B_K_T_D, value_B_K_T_D, attention_mask, *args, **kwargs)
    window = kwargs.pop("sliding_window", None)
    kwargs.pop("position_ids", None)  # positions restart per sample; the rotary embedding has read them
    outputs, start = [], 0
    for length in packed_segments:
        part = slice(start, start + length)
        mask = None
        if window is not None and length > window:  # causal within the window, as the model's own mask
            steps = torch.arange(length, device=query_B_H_T_D.device)
            distance = steps[:, None] - steps[None, :]
            mask = ((distance >= 0) & (distance < window))[None, None]
        out_B_T_H_D, _ = original(
            module,
            query_B_H_T_D[:, :, part],
            key_B_K_T_D[:, :, part],
            value_B_K_T_D[:, :, part],
            mask,
            *args,
            is_causal=mask is None,
            **kwargs,
        )
        outputs.append(out_B_T_H_D)
        start += length
    return torch.cat(outputs, dim=1), None


@torch.no_grad()
def check_packing(model: torch.nn.Module, token_ids: tuple[int, ...], device: torch.device) -> str | None:
    """How `model` takes packed rows: "mapping" (a mask mapping), "none" (attention_mask=None), or None when packed
    log-probs differ from each sample's own (then train it on padded rows). Two sequences of `token_ids`' first
    tokens (at most 6 and 5), packed, against each alone and against the two as one causal sequence."""
    from agentrl.train.samples import TrainSample

    ids = (tuple(token_ids) * 12)[:11]
    first, second = ids[:6], ids[6:]
    samples = [TrainSample(s, (True,) * len(s), (0.0,) * len(s), (0.0,) * len(s)) for s in (first, second)]
    was_training = model.training
    model.eval()
    try:
        alone = [_logits(model, {"input_ids": torch.tensor([s], device=device)}) for s in (first, second)]
        joined = _logits(model, {"input_ids": torch.tensor([ids], device=device)})[len(first) :]
        from agentrl.train.packing import pack

        batch = pack(samples, device)
        leak = float((joined - alone[1]).abs().max())
        for mode in ("mapping", "none"):
            try:
                packed = _logits(model, packed_inputs(batch, mask_mapping=mode == "mapping"))
            except (TypeError, ValueError, AttributeError, KeyError, RuntimeError):
                continue
            error = float((packed - torch.cat(alone)).abs().max())
            if error <= 1e-2 * (1.0 + float(torch.cat(alone).abs().max())) and error < 0.1 * leak:
                return mode
    finally:
        model.train(was_training)
    logger.warning("%s does not take packed sequences: training it on padded rows", type(model).__name__)
    return None


def _logits(model: torch.nn.Module, inputs: dict[str, Any]) -> torch.Tensor:
    return model(**inputs, use_cache=False).logits[0].float().log_softmax(-1)


def packing_mode(models: list[torch.nn.Module], device: torch.device) -> str | None:
    """How micro-batches reach `models` (the trained model first, a reference model after it): packed ("mapping" or
    "none", `check_packing`), or None for padded rows. Decided on fixed tokens, so every rank decides alike."""
    if not all(enable_packing(m) for m in models):
        return None
    vocab = int(getattr(getattr(models[0], "config", None), "vocab_size", 0) or 16)
    return check_packing(models[0], tuple(1 + k % max(vocab - 1, 1) for k in range(3, 14)), device)
