"""What the learner trains on: `TrainSample` (one trajectory's tokens, loss mask, advantages and sampler
logprobs), how a batch is split into mini-batches, and `MicroBatch`, the tensors of one forward pass (right-padded
here by `collate`; packed into one row by `agentrl/train/packing.py`), copied to the device in one transfer."""

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
    """Padded micro-batches (`collate`): group indices so that rows × longest row ≤ `max_tokens`, longest first to
    cut padding.

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
class MicroBatch:
    """One forward pass's inputs and the per-sample fields its objective reads, on the compute device.

    The forward pass runs on `input_ids_B_T`: right-padded rows (`collate`, with `attention_mask_B_T`) or every
    sample concatenated into one row (`agentrl/train/packing.py`, with `position_ids_B_T` restarting at 0 for each
    sample and the samples' lengths in `segments`). Either way the `_S_T1` fields have one row per sample, right
    padded, lined up with its targets (tokens 1..L−1), which is the layout the objective's per-sequence statistics
    read. The forward pass's positions, flattened, map onto them through three index tensors of the N loss tokens:
    `source_N` (the position whose logits score the token), `dest_N` (the token's flat index into S × T1) and
    `targets_N` (its id); only those positions are ever projected onto the vocabulary.
    """

    input_ids_B_T: Tensor
    attention_mask_B_T: Tensor | None
    position_ids_B_T: Tensor | None
    segments: tuple[int, ...] | None
    """Packed: the samples' lengths, in order (host integers: the attention reads them without a device sync)."""
    mask_S_T1: Tensor
    advantages_S_T1: Tensor
    sampler_logprobs_S_T1: Tensor
    sampler_entropies_S_T1: Tensor
    source_N: Tensor
    dest_N: Tensor
    targets_N: Tensor

    @property
    def mask_B_T1(self) -> Tensor:  # the name the objective and older callers use
        return self.mask_S_T1

    @property
    def advantages_B_T1(self) -> Tensor:
        return self.advantages_S_T1

    @property
    def sampler_logprobs_B_T1(self) -> Tensor:
        return self.sampler_logprobs_S_T1

    @property
    def sampler_entropies_B_T1(self) -> Tensor:
        return self.sampler_entropies_S_T1

    @property
    def computed_tokens(self) -> int:
        """Positions the forward pass computes, padding included."""
        return self.input_ids_B_T.numel()


PaddedSamples = MicroBatch


def per_sample_fields(samples: Sequence[TrainSample], offsets: Sequence[int]) -> dict[str, Any]:
    """The `_S_T1` fields and the loss-token indices of `samples`, as host tensors; `offsets[i]` is where sample i
    starts among the forward pass's flattened positions. Advantages and sampler values are zeroed where the mask is
    False, so whatever a caller put there cannot reach the loss, not even as 0 · inf."""
    width = max(len(s.token_ids) for s in samples) - 1

    def rows(values: Any, dtype: torch.dtype) -> Tensor:
        return torch.tensor([list(v[1:]) + [0] * (width + 1 - len(v)) for v in values], dtype=dtype)

    mask = rows((s.loss_mask for s in samples), torch.bool)
    source, dest, targets = [], [], []
    for i, (sample, offset) in enumerate(zip(samples, offsets, strict=True)):
        for t, trained in enumerate(sample.loss_mask[1:]):
            if trained:
                source.append(offset + t)
                dest.append(i * width + t)
                targets.append(sample.token_ids[t + 1])
    entropies = (s.sampler_entropies or (0.0,) * len(s.token_ids) for s in samples)
    return {
        "mask_S_T1": mask,
        "advantages_S_T1": torch.where(mask, rows((s.advantages for s in samples), torch.float32), 0.0),
        "sampler_logprobs_S_T1": torch.where(mask, rows((s.sampler_logprobs for s in samples), torch.float32), 0.0),
        "sampler_entropies_S_T1": torch.where(mask, rows(entropies, torch.float32), 0.0),
        "source_N": torch.tensor(source, dtype=torch.long),
        "dest_N": torch.tensor(dest, dtype=torch.long),
        "targets_N": torch.tensor(targets, dtype=torch.long),
    }


def collate(samples: Sequence[TrainSample], pad_token_id: int, device: torch.device) -> MicroBatch:
    """Right-padded rows, one per sample, with a 2-D attention mask (models that cannot be packed)."""
    width = max(len(s.token_ids) for s in samples)
    fields: dict[str, Any] = {
        "input_ids_B_T": torch.tensor(
            [list(s.token_ids) + [pad_token_id] * (width - len(s.token_ids)) for s in samples], dtype=torch.long
        ),
        "attention_mask_B_T": torch.tensor(
            [[1] * len(s.token_ids) + [0] * (width - len(s.token_ids)) for s in samples], dtype=torch.long
        ),
    }
    fields.update(per_sample_fields(samples, [i * width for i in range(len(samples))]))
    return MicroBatch(position_ids_B_T=None, segments=None, **to_device(fields, device))


def to_device(tensors: dict[str, Tensor], device: torch.device) -> dict[str, Tensor]:
    """`tensors` on `device` in one host→device copy: their bytes packed into one (pinned) buffer, copied without
    blocking the host, and viewed back as the original tensors; on the CPU, as they are."""
    device = torch.device(device)
    if device.type == "cpu":
        return tensors
    # widest element first, so that every view starts at a multiple of its element size
    names = sorted(tensors, key=lambda name: -tensors[name].element_size())
    flat = [tensors[name].contiguous().reshape(-1).view(torch.uint8) for name in names]
    buffer = torch.cat(flat)
    if device.type == "cuda":
        buffer = buffer.pin_memory()
    buffer = buffer.to(device, non_blocking=True)
    out, start = {}, 0
    for name, part in zip(names, flat, strict=True):
        tensor = tensors[name]
        out[name] = buffer[start : start + part.numel()].view(tensor.dtype).view(tensor.shape)
        start += part.numel()
    return out
