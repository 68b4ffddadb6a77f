"""AEPO's entropy-aware advantage applied to a learner mini-batch (`trainer.entropy_advantage_alpha`)."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch import Tensor

from agentrl.train.losses import entropy_aware_advantages
from agentrl.train.samples import TrainSample


def entropy_scaled(samples: list[TrainSample], alpha: float, step_sums: dict[str, Any]) -> list[TrainSample]:
    """AEPO's entropy-aware advantage over one mini-batch: A_t·(1 + α·z(H_t)), z over the mini-batch's loss tokens.

    Deviation from AEPO (which z-scores the trainer's forward-pass entropies per micro-batch): the entropies are
    the sampler's (`TrainSample.sampler_entropies`, the same distribution on-policy at the learner's
    temperature, a top-k proxy with remote samplers) and the statistics span the mini-batch, so the result does
    not depend on packing. Left unchanged when a sample has none (`entropy_advantage_applied` counts the
    mini-batches where it was applied).
    """
    if not all(s.sampler_entropies for s in samples):
        return samples
    step_sums["entropy_advantage_applied"] = step_sums.get("entropy_advantage_applied", 0.0) + 1.0
    width = max(len(s.token_ids) for s in samples)

    def rows(values: Any, dtype: torch.dtype) -> Tensor:
        return torch.tensor([list(v) + [0] * (width - len(v)) for v in values], dtype=dtype)

    mask_B_T = rows((s.loss_mask for s in samples), torch.bool)
    mask_B_T[:, 0] = False  # token 0 never has a loss
    advantages_B_T = entropy_aware_advantages(
        rows((s.advantages for s in samples), torch.float64),
        rows((s.sampler_entropies for s in samples), torch.float64),
        mask_B_T,
        alpha,
    )
    return [
        dataclasses.replace(s, advantages=tuple(advantages_B_T[b, : len(s.token_ids)].tolist()))
        for b, s in enumerate(samples)
    ]
