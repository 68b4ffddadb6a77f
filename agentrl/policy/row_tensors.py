"""`RowTensors`: what the device keeps per row of the decoding loop, so that a step reads nothing from the host.

Two tensors indexed by slot: integers (the pending token, its position, the row's step count and its two random
keys) and floats (temperature, top-p). A step reads views of the first R slots and advances them in place (one
op for positions and steps together); a joining row's values arrive in one copy per tensor; a leaving row is
replaced by the last one (one row copied per tensor).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

PENDING, POSITION, STEP, KEYS = 0, 1, 2, slice(3, 5)
TEMPERATURE, TOP_P = 0, 1


class RowTensors:
    def __init__(self, device: torch.device):
        self.device = device
        self.ints = torch.zeros((0, 5), dtype=torch.long, device=device)
        self.floats = torch.zeros((0, 2), dtype=torch.float32, device=device)
        self.arange = torch.zeros(0, dtype=torch.long, device=device)
        """0, 1, 2, ... (slot numbers, column numbers), at least as long as slots and columns."""

    def reserve(self, slots: int, columns: int = 0) -> None:
        if slots > self.ints.shape[0]:
            size = max(slots, 2 * self.ints.shape[0], 8)
            self.ints = _grown(self.ints, size)
            self.floats = _grown(self.floats, size)
        if max(slots, columns) > self.arange.shape[0]:
            self.arange = torch.arange(max(slots, columns, 2 * self.arange.shape[0]), device=self.device)

    def write(self, first: int, ints: Sequence[Sequence[int]], floats: Sequence[Sequence[float]]) -> None:
        """Set slots [first, first + len(ints)) to the given rows (pending, position, step, key, key) and
        (temperature, top_p)."""
        n = len(ints)
        self.reserve(first + n)
        self.ints[first : first + n].copy_(torch.tensor(ints, dtype=torch.long), non_blocking=True)
        self.floats[first : first + n].copy_(torch.tensor(floats, dtype=torch.float32), non_blocking=True)

    def move(self, sources: Sequence[int], targets: Sequence[int]) -> None:
        for s, t in zip(sources, targets, strict=True):
            self.ints[t].copy_(self.ints[s])
            self.floats[t].copy_(self.floats[s])

    def advance(self, first: int, rows: int, tokens_R: torch.Tensor) -> None:
        """After a forward pass over slots [first, first + rows): the sampled tokens become pending, positions and
        steps move on by one."""
        self.ints[first : first + rows, PENDING].copy_(tokens_R)
        self.ints[first : first + rows, POSITION : STEP + 1].add_(1)


def _grown(old: torch.Tensor, rows: int) -> torch.Tensor:
    fresh = old.new_zeros((rows, old.shape[1]))
    fresh[: old.shape[0]].copy_(old)
    return fresh
