"""`SlotMasks`: the attention mask of a forward pass over `SlotCache` slots, built from positions alone.

A query at position q sees the columns c <= q of its own slot (and, in a sliding-window layer, only those with
c > q - window, transformers' rule). Columns past a row's position hold nothing of it (padding of a prefill, or
what a slot's previous occupant left) and are hidden by the same rule. The mask is 4-D and additive (0 where
seen, the dtype's minimum elsewhere), in the dtype attention computes in (autocast's when it is on), which every
supported model and attention kernel takes as it is: no layer converts it again. A model whose layers mix full
and sliding-window attention gets one mask per kind.
"""

from __future__ import annotations

from typing import Any

import torch

from agentrl.errors import ConfigError
from agentrl.train.packed_attention import PREFIX as PACKED_PREFIX

KINDS = ("full_attention", "sliding_attention")


class SlotMasks:
    def __init__(self, config: Any, dtype: torch.dtype):
        implementation = getattr(config, "_attn_implementation", None) or "sdpa"
        # the learner's packing wrapper computes exactly what it wraps for calls without sample lengths (ours)
        implementation = implementation.removeprefix(PACKED_PREFIX)
        if implementation not in ("sdpa", "eager"):
            raise ConfigError(
                f"the in-process sampler runs attention as sdpa or eager; this model uses {implementation!r} "
                "(load it with attn_implementation='sdpa')"
            )
        self.window: int | None = getattr(config, "sliding_window", None)
        layer_types = getattr(config, "layer_types", None)
        if layer_types:
            self.kinds = set(layer_types)
        else:  # Mistral-style configs: one window (or none) for every layer
            self.kinds = {"sliding_attention" if self.window else "full_attention"}
        unknown = self.kinds - set(KINDS)
        if unknown:
            raise ConfigError(f"the in-process sampler cannot attend with layer types {sorted(unknown)}")
        if "sliding_attention" in self.kinds and not self.window:
            self.kinds = {"full_attention"}
        self.dtype = dtype
        """The weights' dtype: attention's, unless autocast is on."""
        self._values: dict[tuple[torch.dtype, torch.device], tuple[torch.Tensor, torch.Tensor]] = {}

    def build(self, positions_N_T: torch.Tensor, columns_W: torch.Tensor) -> torch.Tensor | dict[str, torch.Tensor]:
        """The mask (N, 1, T, W) for queries at `positions_N_T` over key columns `columns_W` (0 .. W-1)."""
        query_N1T1 = positions_N_T[:, None, :, None]
        seen = columns_W <= query_N1T1
        open_, shut = self._fill(positions_N_T.device)
        masks = {}
        if "full_attention" in self.kinds:
            masks["full_attention"] = torch.where(seen, open_, shut)
        if "sliding_attention" in self.kinds:
            assert self.window is not None
            masks["sliding_attention"] = torch.where(seen & (columns_W > query_N1T1 - self.window), open_, shut)
        return next(iter(masks.values())) if len(masks) == 1 else masks

    def _fill(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        dtype = torch.get_autocast_dtype(device.type) if torch.is_autocast_enabled(device.type) else self.dtype
        values = self._values.get((dtype, device))
        if values is None:
            zero = torch.zeros((), dtype=dtype, device=device)
            values = self._values[(dtype, device)] = (
                zero,
                torch.full((), torch.finfo(dtype).min, dtype=dtype, device=device),
            )
        return values
