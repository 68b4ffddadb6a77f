"""What the learner trains on: `TrainSample` (one trajectory's tokens, loss mask, advantages and sampler
logprobs) and how a mini-batch of them is split and packed into padded `PaddedSamples` tensors."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor


@dataclass(frozen=True)
class TrainSample:
    """One trajectory as the learner sees it; all four sequences have one entry per token."""

    token_ids: tuple[int, ...]
    loss_mask: tuple[bool, ...]
    """True only on policy-sampled tokens (never prompt or tool-output tokens). Token 0 never has a loss."""
    advantages: tuple[float, ...]
    """Per-token advantage; ignored where `loss_mask` is False."""
    sampler_logprobs: tuple[float, ...]
    """Logprobs the sampler reported for each token (0 where masked)."""
    sampler_entropies: tuple[float, ...] = ()
    """Entropy of the sampling distribution at each token (0 where masked); empty when the sampler gave none.
    AEPO's entropy-aware advantage reads it."""
    trajectory_id: str | None = None
    """The trajectory it was made from, so the run's trajectory log can say what the update did with each turn."""

    def __post_init__(self) -> None:
        lengths = {len(self.token_ids), len(self.loss_mask), len(self.advantages), len(self.sampler_logprobs)}
        if self.sampler_entropies:
            lengths.add(len(self.sampler_entropies))
        if len(lengths) != 1:
            raise ValueError(f"TrainSample fields differ in length: {sorted(lengths)}")
        if not self.token_ids:
            raise ValueError("TrainSample has no tokens")

    @property
    def num_loss_tokens(self) -> int:
        return sum(self.loss_mask[1:])


def split_minibatches(num_samples: int, num_minibatches: int) -> list[range]:
    """Contiguous, in-order index ranges whose sizes differ by at most one (empty ranges are dropped)."""
    bounds = [num_samples * k // num_minibatches for k in range(num_minibatches + 1)]
    return [range(a, b) for a, b in zip(bounds, bounds[1:], strict=False) if b > a]


def plan_microbatches(lengths: Sequence[int], max_tokens: int) -> list[list[int]]:
    """Group indices so that rows × longest row ≤ `max_tokens`, longest first to cut padding.

    A single sample longer than the budget forms its own micro-batch.
    """
    plans: list[list[int]] = []
    current: list[int] = []
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        if current and (len(current) + 1) * lengths[current[0]] > max_tokens:
            plans.append(current)
            current = []
        current.append(i)
    return plans + [current] if current else plans


@dataclass
class PaddedSamples:
    """Right-padded tensors of one micro-batch; `_B_T1` ones line up with the targets (positions 1..T-1)."""

    input_ids_B_T: Tensor
    attention_mask_B_T: Tensor
    targets_B_T1: Tensor
    mask_B_T1: Tensor
    advantages_B_T1: Tensor
    sampler_logprobs_B_T1: Tensor
    sampler_entropies_B_T1: Tensor


def collate(samples: Sequence[TrainSample], pad_token_id: int, device: torch.device) -> PaddedSamples:
    """Pad samples on the right and shift the per-token fields by one to line up with next-token logits.

    Advantages and sampler logprobs are zeroed where the mask is False, so whatever a caller put there cannot
    reach the loss, not even as 0 · inf.
    """
    width = max(len(s.token_ids) for s in samples)

    def rows(values: Any, fill: Any, dtype: torch.dtype) -> Tensor:
        return torch.tensor([list(v) + [fill] * (width - len(v)) for v in values], dtype=dtype, device=device)

    input_ids = rows((s.token_ids for s in samples), pad_token_id, torch.long)
    attention = rows(([1] * len(s.token_ids) for s in samples), 0, torch.long)
    mask = rows((s.loss_mask for s in samples), False, torch.bool)[:, 1:]
    advantages = rows((s.advantages for s in samples), 0.0, torch.float32)[:, 1:]
    sampler = rows((s.sampler_logprobs for s in samples), 0.0, torch.float32)[:, 1:]
    entropies = rows((s.sampler_entropies or [0.0] * len(s.token_ids) for s in samples), 0.0, torch.float32)[:, 1:]
    return PaddedSamples(
        input_ids_B_T=input_ids,
        attention_mask_B_T=attention,
        targets_B_T1=input_ids[:, 1:],
        mask_B_T1=mask,
        advantages_B_T1=torch.where(mask, advantages, 0.0),
        sampler_logprobs_B_T1=torch.where(mask, sampler, 0.0),
        sampler_entropies_B_T1=torch.where(mask, entropies, 0.0),
    )
