"""The learner's compute precision (`trainer.precision`): which one applies, and the autocast it runs under.

- `fp32`: no autocast over fp32 weights.
- `bf16-mixed`: the forward passes run under bf16 autocast (matrix products in bf16) while the weights, their
  gradients and the AdamW state stay fp32, so an update far below bf16's resolution (about 0.4% of a weight, where
  RL learning rates of 1e-6 to 1e-5 land) still accumulates in the master copy. Log-probabilities and the loss are
  computed in fp32 from the (bf16) logits either way.
- `bf16`: no autocast; the model computes in whatever dtype its weights are in, bf16 weights included, and then an
  optimizer step smaller than a weight's bf16 spacing rounds back to the same weight.
- `auto`: bf16-mixed on a CUDA device that supports bf16, fp32 otherwise; `bf16` where the trainable weights are
  already half precision, since there is no fp32 copy to mix over.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

import torch

from agentrl.errors import ConfigError

PRECISIONS = ("auto", "fp32", "bf16-mixed", "bf16")

_HALF = (torch.bfloat16, torch.float16)


def resolve_precision(precision: str, params: Iterable[torch.Tensor]) -> str:
    """The precision `precision` means for these trainable parameters: `fp32`, `bf16-mixed` or `bf16`.

    `fp32` and `bf16-mixed` promise fp32 master weights; asking for them over half-precision weights is an error
    rather than a silent bf16 run whose small updates vanish.
    """
    if precision not in PRECISIONS:
        raise ConfigError(f"unknown trainer.precision {precision!r}; known: {', '.join(PRECISIONS)}")
    params = list(params)
    half = sorted({str(p.dtype).removeprefix("torch.") for p in params if p.dtype in _HALF})
    if precision == "auto":
        if half:
            return "bf16"
        device = params[0].device if params else torch.device("cpu")
        return "bf16-mixed" if device.type == "cuda" and torch.cuda.is_bf16_supported() else "fp32"
    if half and precision in ("fp32", "bf16-mixed"):
        raise ConfigError(
            f"trainer.precision={precision} needs fp32 weights, but trainable weights are {', '.join(half)}: load "
            "them with policy.dtype=float32 (or auto), or set trainer.precision=bf16"
        )
    return precision


def autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager[object]:
    """The autocast context of a resolved precision on `device` (a no-op except for `bf16-mixed`)."""
    if precision == "bf16-mixed":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()
