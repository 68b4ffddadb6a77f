"""Activation checkpointing decided by memory: how many decoder layers recompute their activations.

`recomputed_layers(shape, tokens_per_microbatch, device_bytes)` is a pure function of the model's shape, the
tokens of one micro-batch and the device's memory: 0 (off) when the update fits, else the fewest layers whose
recomputation brings it under the budget (all of them at worst). A recomputed layer keeps only its input (one
hidden-size vector per token) and recomputes the rest in the backward pass, so layers are traded one at a time
instead of all or nothing; `apply_checkpointing` switches exactly that many of the model's decoder layers to
recompute (evenly spread) and leaves the others alone.

The estimate, per token and decoder layer, of what the backward pass keeps: the bf16 (or fp32) inputs and outputs
of the attention and MLP projections, the attention output and its softmax statistics, the SwiGLU's three
intermediate-size tensors and the fp32 copies RMSNorm makes: about 12·h + 5·I elements in the compute dtype plus
4·h in fp32 (h the hidden size, I the MLP width). Static memory: the parameters, their gradients, fp32 masters and
gradients when the parameters are bf16, and AdamW's two fp32 moments of the trainable ones; plus the chunked
log-prob's working set (chunk × vocabulary, fp32 and compute dtype). On an H100 this predicts 22.8 GB for Qwen3-0.6B's
shape at 4,096 tokens per micro-batch without checkpointing, against 22.4 GiB measured. 10% of the device is left to
the allocator's fragmentation and to what the estimate misses.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from typing import Any

import torch

HEADROOM = 0.9
"""Fraction of the device's memory the estimate may fill."""


@dataclass(frozen=True)
class ModelShape:
    """What the memory estimate reads of a model."""

    parameters: int
    trainable: int
    layers: int
    hidden: int
    intermediate: int
    vocab: int
    param_bytes: int = 4
    """Bytes per parameter as the model holds them (2 for bf16 parameters with fp32 masters)."""

    @classmethod
    def of(cls, model: torch.nn.Module) -> ModelShape:
        config = getattr(model, "config", None)
        text = getattr(config, "text_config", None) or config
        hidden = int(getattr(text, "hidden_size", 0) or 0)
        params = list(model.parameters())
        return cls(
            parameters=sum(p.numel() for p in params),
            trainable=sum(p.numel() for p in params if p.requires_grad),
            layers=int(getattr(text, "num_hidden_layers", 0) or 0),
            hidden=hidden,
            intermediate=int(getattr(text, "intermediate_size", 0) or 4 * hidden),
            vocab=int(getattr(text, "vocab_size", 0) or 0),
            param_bytes=params[0].element_size() if params else 4,
        )


def static_bytes(shape: ModelShape) -> int:
    """Parameters, gradients, masters and AdamW moments."""
    per_trainable = shape.param_bytes + 8  # its gradient, AdamW's two fp32 moments
    if shape.param_bytes < 4:
        per_trainable += 8  # the fp32 master and its fp32 gradient (fp32 parameters are their own masters)
    return shape.parameters * shape.param_bytes + shape.trainable * per_trainable


def activation_bytes_per_token(shape: ModelShape, *, recomputed: bool) -> int:
    """What one decoder layer keeps per token for the backward pass (its input alone when it is recomputed)."""
    if recomputed:
        return shape.hidden * shape.param_bytes
    return (12 * shape.hidden + 5 * shape.intermediate) * shape.param_bytes + 4 * shape.hidden * 4


def recomputed_layers(
    shape: ModelShape, tokens_per_microbatch: int, device_bytes: int, chunk_tokens: int = 4096
) -> int:
    """Decoder layers to recompute so that the update fits in `HEADROOM` of `device_bytes`: 0 when it fits as is."""
    if shape.layers <= 0 or shape.hidden <= 0:
        return 0
    chunk = min(chunk_tokens, tokens_per_microbatch) if chunk_tokens > 0 else tokens_per_microbatch
    logprob_bytes = chunk * shape.vocab * (8 + shape.param_bytes)  # fp32 log-probs and gradient, the logits
    budget = HEADROOM * device_bytes - static_bytes(shape) - logprob_bytes
    full = activation_bytes_per_token(shape, recomputed=False) * tokens_per_microbatch
    saved = full - activation_bytes_per_token(shape, recomputed=True) * tokens_per_microbatch
    # a recomputed layer's activations exist again, one layer at a time, during its backward pass
    overshoot = shape.layers * full - budget
    if overshoot <= 0:
        return 0
    if saved <= 0:
        return shape.layers
    return min(shape.layers, math.ceil((overshoot + full) / saved))


def device_memory_bytes(device: torch.device) -> int:
    """The memory the learner's device has: the GPU's, or the machine's RAM for the CPU."""
    if device.type == "cuda":
        return int(torch.cuda.get_device_properties(device).total_memory)
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 1 << 40  # unknown: assume it fits


def checkpointed_layers_of(model: torch.nn.Module) -> list[Any]:
    """The model's decoder layers that can recompute (transformers' `GradientCheckpointingLayer`s)."""
    try:
        from transformers.modeling_layers import GradientCheckpointingLayer
    except ImportError:
        return []
    return [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]


def apply_checkpointing(model: torch.nn.Module, count: int) -> int:
    """Make `count` of `model`'s decoder layers (evenly spread) recompute their activations; the others keep
    theirs. Returns how many recompute. A model already checkpointing (`policy.gradient_checkpointing=true`) is
    left as it is."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    layers = checkpointed_layers_of(base)
    if any(layer.gradient_checkpointing for layer in layers):
        return sum(layer.gradient_checkpointing for layer in layers)
    if count <= 0 or not layers:
        return 0
    enable = getattr(base, "activation_checkpointing_enable", None) or base.gradient_checkpointing_enable
    enable()
    base.config.use_cache = False
    chosen = {round(k * len(layers) / min(count, len(layers))) for k in range(min(count, len(layers)))}
    for index, layer in enumerate(layers):
        layer.gradient_checkpointing = index in chosen
    return sum(layer.gradient_checkpointing for layer in layers)


def plan_checkpointing(
    model: torch.nn.Module,
    forced: bool | None,
    *,
    param_dtype: torch.dtype | None,
    tokens_per_microbatch: int,
    chunk_tokens: int,
) -> int:
    """Switch on activation checkpointing in `model` as `policy.gradient_checkpointing` says (`forced`: True in
    every layer, False in none, None by memory, for parameters about to be cast to `param_dtype`); returns how many
    decoder layers recompute."""
    if forced is False:
        return sum(layer.gradient_checkpointing for layer in checkpointed_layers_of(model))
    shape = ModelShape.of(model)
    if param_dtype is not None:
        shape = dataclasses.replace(shape, param_bytes=torch.empty((), dtype=param_dtype).element_size())
    device = next(p for p in model.parameters() if p.requires_grad).device
    memory = device_memory_bytes(device)
    count = shape.layers if forced else recomputed_layers(shape, tokens_per_microbatch, memory, chunk_tokens)
    return apply_checkpointing(model, count)
