"""Padding-free micro-batches: the samples of a micro-batch concatenated into one row, planned by a token budget.

`plan_packed` groups samples into micro-batches of at most `trainer.max_tokens_per_microbatch` tokens (first fit,
longest first: nearly full micro-batches, so few of them); `pack` lays one micro-batch out as a single row with
`position_ids` restarting at 0 for every sample, which the model's rotary embeddings read as each sample's own
positions, and the samples' lengths (`MicroBatch.segments`), which confine attention to each sample
(`packed_attention.py`). No position is padding, so the forward pass computes exactly the batch's tokens; the
per-sample fields the objective reads stay one row per sample (`samples.per_sample_fields`).

The same layout as TRL's `padding_free`, verl's `use_remove_padding` with `use_dynamic_bsz` and OpenRLHF's
`--packing_samples`.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate

import torch

from agentrl.train.samples import MicroBatch, TrainSample, per_sample_fields, to_device


def plan_packed(lengths: Sequence[int], max_tokens: int) -> list[list[int]]:
    """Indices grouped into micro-batches of at most `max_tokens` tokens in all: first-fit decreasing, so each
    sample goes into the first micro-batch it fits, longest samples first. A sample longer than the budget forms
    its own micro-batch. Deterministic: ties keep the input order."""
    plans: list[list[int]] = []
    room: list[int] = []
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        slot = next((k for k, free in enumerate(room) if lengths[i] <= free), None)
        if slot is None:
            plans.append([i])
            room.append(max_tokens - lengths[i])
        else:
            plans[slot].append(i)
            room[slot] -= lengths[i]
    return plans


def pack(samples: Sequence[TrainSample], device: torch.device) -> MicroBatch:
    """`samples` as one row of tokens (1 × Σ lengths) with per-sample positions; one host→device copy."""
    lengths = [len(s.token_ids) for s in samples]
    offsets = [0, *accumulate(lengths)][:-1]
    fields = {
        "input_ids_B_T": torch.tensor([[t for s in samples for t in s.token_ids]], dtype=torch.long),
        "position_ids_B_T": torch.tensor([[p for n in lengths for p in range(n)]], dtype=torch.long),
    }
    fields.update(per_sample_fields(samples, offsets))
    return MicroBatch(attention_mask_B_T=None, segments=tuple(lengths), **to_device(fields, device))


def padding_efficiency(lengths: Sequence[int], plans: Sequence[Sequence[int]], *, packed: bool) -> float:
    """The samples' tokens over the positions the forward passes compute: 1.0 when packed, Σ len / Σ rows × longest
    row when padded."""
    computed = sum(
        sum(lengths[i] for i in plan) if packed else len(plan) * max(lengths[i] for i in plan) for plan in plans
    )
    return sum(lengths) / max(computed, 1)
