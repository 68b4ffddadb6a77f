"""The learner's precision (`trainer.precision`): which one applies, and the dtype the model's parameters take.

- `fp32`: fp32 parameters, gradients and AdamW state; nothing is cast. The CPU default: the learner's log-probs
  match the in-process sampler's to ~1e-6.
- `bf16-mixed`: the model's parameters are bf16 (the forward and backward passes, and the in-process sampler that
  shares the model, compute in bf16 with no autocast and no per-pass casts), while the optimizer keeps fp32 master
  copies of the trainable ones: gradients accumulate over micro-batches in fp32, AdamW steps the masters, and each
  step writes them back to the bf16 parameters (`master_weights.py`). So an update far below bf16's resolution
  (about 0.4% of a weight, where RL learning rates of 1e-6 to 1e-5 land) still accumulates. A LoRA model's frozen
  base is bf16 too, its adapters have fp32 masters. Log-probabilities and the loss are computed in fp32.
- `bf16`: whatever dtype the weights are in, bf16 weights included, with no master copy: an optimizer step smaller
  than a weight's bf16 spacing rounds back to the same weight.
- `auto`: bf16-mixed on a CUDA device that supports bf16; elsewhere fp32, or bf16 where the weights were loaded in
  half precision.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from agentrl.errors import ConfigError

PRECISIONS = ("auto", "fp32", "bf16-mixed", "bf16")

_HALF = (torch.bfloat16, torch.float16)


def resolve_precision(precision: str, params: Iterable[torch.Tensor]) -> str:
    """The precision `precision` means for these trainable parameters: `fp32`, `bf16-mixed` or `bf16`.

    `fp32` over half-precision weights is an error rather than a silent bf16 run whose small updates vanish.
    """
    if precision not in PRECISIONS:
        raise ConfigError(f"unknown trainer.precision {precision!r}; known: {', '.join(PRECISIONS)}")
    params = list(params)
    half = sorted({str(p.dtype).removeprefix("torch.") for p in params if p.dtype in _HALF})
    if precision == "auto":
        device = params[0].device if params else torch.device("cpu")
        if device.type == "cuda" and torch.cuda.is_bf16_supported():
            return "bf16-mixed"
        return "bf16" if half else "fp32"
    if half and precision == "fp32":
        raise ConfigError(
            f"trainer.precision=fp32 needs fp32 weights, but trainable weights are {', '.join(half)}: load them "
            "with policy.dtype=float32 (or auto), or set trainer.precision=bf16-mixed"
        )
    return precision


def parameter_dtype(precision: str) -> torch.dtype | None:
    """The dtype a resolved precision gives the model's parameters; None: they keep theirs."""
    return torch.bfloat16 if precision == "bf16-mixed" else None


def cast_parameters(model: torch.nn.Module, dtype: torch.dtype | None) -> None:
    """Every floating-point parameter of `model` in `dtype`, in place (the same Parameter objects); buffers keep
    theirs (rotary frequencies stay fp32, as transformers builds them)."""
    if dtype is None:
        return
    with torch.no_grad():
        for param in model.parameters():
            if param.is_floating_point() and param.dtype != dtype:
                param.data = param.data.to(dtype)
