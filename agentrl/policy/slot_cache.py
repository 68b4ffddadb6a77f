"""`SlotCache`: a key/value cache of preallocated per-row slots that rows join and leave without copying the others.

Each attention layer keeps one key and one value tensor of shape (slots, heads, columns, head_dim). Row r of the
decoding loop lives in slot r, and the key/value of the token at position p of a row is written at column p of
its slot, so a row's cache needs no padding and no other row's cache moves when it joins. A forward pass covers a
window of consecutive slots (`begin`): the model's `update` writes the new keys and values in place (one
`index_put_` per tensor) and reads back a view of the window's first `width` columns; an attention mask built
from the positions (`attention_mask`) hides every column past a row's own position, which also hides whatever a
slot's previous occupant left there. The window's width is rounded up to a multiple of `SPAN` columns, so the
views handed to attention are made once per `SPAN` steps instead of once per layer and step (the few masked
columns cost less than the extra ops). When a row leaves, the loop moves the last row into its slot (`move`): one
row's columns are copied, not the batch's.

The tensors grow geometrically when a step needs more slots or columns than they hold, and are freed when the loop
empties (`release`), so an idle sampler holds no cache memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from transformers.cache_utils import Cache, CacheLayerMixin

SPAN = 64
"""Columns are reserved, and windows read, in multiples of this."""


class _SlotLayer(CacheLayerMixin):
    """One layer's entry point; the tensors live in the `SlotCache`."""

    is_compileable = False
    is_sliding = False

    def __init__(self, owner: SlotCache, index: int):
        super().__init__()
        self.owner, self.index = owner, index

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        pass

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any):
        return self.owner.update(key_states, value_states, self.index)

    def get_seq_length(self) -> int:
        return self.owner.width

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.owner.width, 0

    def get_max_length(self) -> int:
        return -1


class SlotCache(Cache):
    """Per-row slots of keys and values for every layer of a model (see the module docstring)."""

    def __init__(self, num_layers: int, device: torch.device):
        super().__init__(layers=[_SlotLayer(self, i) for i in range(num_layers)])
        self.device = device
        self.keys: list[torch.Tensor | None] = [None] * num_layers
        self.values: list[torch.Tensor | None] = [None] * num_layers
        self.slots = self.columns = 0
        """Capacity the next forward pass needs (tensors grow to it at their first use)."""
        self.first = self.rows = self.width = 0
        self._write: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
        self._heads = torch.empty(0, dtype=torch.long, device=device)
        self._views: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * num_layers
        self._views_for: tuple[int, int, int] | None = None

    # --- capacity ---------------------------------------------------------------------------------------

    @property
    def allocated(self) -> bool:
        return self.keys[0] is not None

    def reserve(self, slots: int, columns: int) -> None:
        """Make room for `slots` rows of `columns` positions (grown geometrically, contents kept)."""
        if slots <= self.slots and columns <= self.columns:
            return
        self.slots = max(self.slots, _grown(self.slots, slots, 4, 2.0))
        self.columns = max(self.columns, _grown(self.columns, columns, SPAN, 1.25))
        self._drop_views()
        if self.allocated:
            for store in (self.keys, self.values):
                for i, old in enumerate(store):
                    assert old is not None
                    store[i] = self._allocate(old.shape[1], old.shape[3], old.dtype, like=old)

    def _allocate(self, heads: int, dim: int, dtype: torch.dtype, like: torch.Tensor | None = None) -> torch.Tensor:
        # zeros, not empty: a masked column still meets its value in `0 * value`, and garbage may be nan
        fresh = torch.zeros((self.slots, heads, self.columns, dim), dtype=dtype, device=self.device)
        if like is not None:
            fresh[: like.shape[0], :, : like.shape[2]].copy_(like)
        return fresh

    def release(self) -> None:
        """Free the tensors (the next forward pass allocates them again)."""
        self.keys = [None] * len(self.keys)
        self.values = [None] * len(self.values)
        self.slots = self.columns = 0
        self._drop_views()

    def _drop_views(self) -> None:
        self._views = [None] * len(self._views)
        self._views_for = None

    # --- a forward pass -----------------------------------------------------------------------------------

    def begin(self, first: int, positions_N_T: torch.Tensor, width: int, rows_N11: torch.Tensor) -> int:
        """The next forward pass covers slots [first, first + N); its token (n, t) is at position
        `positions_N_T[n, t]`, written at that column of slot `rows_N11[n]`; attention reads at least `width`
        columns. Returns the columns it reads (`width` rounded up to a multiple of `SPAN`)."""
        rows, width = positions_N_T.shape[0], -(-width // SPAN) * SPAN
        self.reserve(first + rows, width)
        if self._views_for != (first, rows, width):
            self._drop_views()
            self._views_for = (first, rows, width)
        self.first, self.rows, self.width = first, rows, width
        self._write = (rows_N11, self._heads, positions_N_T[:, None, :])
        return width

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args: Any, **kwargs: Any):
        """Write a layer's new keys and values (N, heads, T, dim) into their slots; the window's keys and values."""
        assert self._write is not None, "SlotCache.begin() before a forward pass"
        keys, values = self.keys[layer_idx], self.values[layer_idx]
        if keys is None or values is None:
            keys, values = self._first_use(layer_idx, key_states, value_states)
        rows, heads, columns = self._write
        if heads.numel() != key_states.shape[1]:
            heads = self._heads = torch.arange(key_states.shape[1], device=self.device)[None, :, None]
            self._write = (rows, heads, columns)
        keys.index_put_((rows, heads, columns), key_states)
        values.index_put_((rows, heads, columns), value_states)
        views = self._views[layer_idx]
        if views is None:  # views of the storage: they see what later steps write
            views = self._views[layer_idx] = (self._window(keys), self._window(values))
        return views

    def _window(self, store: torch.Tensor) -> torch.Tensor:
        size = (self.rows, store.shape[1], self.width, store.shape[3])
        return store.as_strided(size, store.stride(), store.storage_offset() + self.first * store.stride(0))

    def _first_use(self, layer_idx: int, key_states: torch.Tensor, value_states: torch.Tensor):
        self.keys[layer_idx] = self._allocate(key_states.shape[1], key_states.shape[3], key_states.dtype)
        self.values[layer_idx] = self._allocate(value_states.shape[1], value_states.shape[3], value_states.dtype)
        return self.keys[layer_idx], self.values[layer_idx]

    # --- rows moving in and out ---------------------------------------------------------------------------

    def move(self, sources: Sequence[int], targets: Sequence[int], columns: int) -> None:
        """Copy the first `columns` columns of each source slot into its target slot."""
        if not sources or not self.allocated:
            return
        if len(sources) == 1:
            s, t = sources[0], targets[0]
            for store in self._stores():
                store[t, :, :columns].copy_(store[s, :, :columns])
            return
        index = torch.tensor([list(sources), list(targets)], dtype=torch.long).to(self.device, non_blocking=True)
        for store in self._stores():
            view = store[:, :, :columns]
            view.index_copy_(0, index[1], view.index_select(0, index[0]))

    def load(self, slot: int, kv: Sequence[tuple[torch.Tensor, torch.Tensor]], columns: int) -> None:
        """Copy the first `columns` positions of a parked row's keys and values (`export`'s) into `slot`."""
        for layer, (k, v) in enumerate(kv):
            keys, values = self.keys[layer], self.values[layer]
            if keys is None or values is None:
                keys, values = self._first_use(layer, k[None], v[None])
            keys[slot, :, :columns].copy_(k[:, :columns])
            values[slot, :, :columns].copy_(v[:, :columns])

    def export(self, slot: int, columns: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """A copy of the first `columns` positions of `slot`, per layer (heads, columns, dim) for keys and values."""
        out = []
        for keys, values in zip(self.keys, self.values, strict=True):
            assert keys is not None and values is not None
            out.append((keys[slot, :, :columns].clone(), values[slot, :, :columns].clone()))
        return out

    def _stores(self) -> list[torch.Tensor]:
        return [t for t in self.keys + self.values if t is not None]

    # --- what `Cache` users may ask ---------------------------------------------------------------------------

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.width

    def get_mask_sizes(self, query_length: int, layer_idx: int = 0) -> tuple[int, int]:
        return self.width, 0

    @property
    def is_compileable(self) -> bool:
        return False


def _grown(have: int, need: int, least: int, factor: float) -> int:
    """Capacity for `need`: at least `factor` times what there was (so growing costs O(1) copies per position
    over time), rounded up to a multiple of `least`."""
    if need <= have:
        return have
    size = max(need, int(factor * have), least)
    return -(-size // least) * least
