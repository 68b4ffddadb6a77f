"""`MasterWeightAdamW`: AdamW over fp32 master copies of low-precision parameters (`trainer.precision=bf16-mixed`).

The model's trainable parameters may be bf16 (what the forward and backward passes and the in-process sampler
compute with); the optimizer keeps an fp32 master of each one, and of its gradient:

- `accumulate()`, after each micro-batch's backward pass, adds the bf16 gradients into the fp32 master gradients
  and frees them, so the mini-batch gradient is summed in fp32, not in bf16;
- `step(max_norm)` clips the master gradients' global norm, steps AdamW on the masters and copies them back into
  the bf16 parameters (one rounding per optimizer step, never accumulated);
- `state_dict()` is the inner AdamW's, in the format and parameter order of an AdamW over the parameters
  themselves; `master_weights()` / `load_master_weights()` move the fp32 masters in and out (checkpoints).

fp32 (or float64) parameters are their own masters: nothing is copied and this is plain AdamW. AdamW is the fused
implementation where torch has it for the parameters' device (CUDA, and the CPU from torch 2.4); a step whose
gradient norm is not finite is skipped on the device (the fused kernel's `found_inf`), so stepping needs no host
sync; other implementations read the norm on the host to skip it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

_FULL = (torch.float32, torch.float64)


class MasterWeightAdamW:
    """AdamW on fp32 masters of `named_params` (name, parameter); see the module docstring. With `param_dtype` (bf16)
    each parameter's fp32 master is taken from its current value, then the parameter is cast to `param_dtype`;
    without it the parameters are stepped as they are."""

    def __init__(
        self,
        named_params: Sequence[tuple[str, torch.nn.Parameter]],
        *,
        lr: float,
        betas: tuple[float, float],
        weight_decay: float,
        param_dtype: torch.dtype | None = None,
        fused: bool = True,
    ) -> None:
        self.names = [name for name, _ in named_params]
        self.params = [param for _, param in named_params]
        self.masters = []
        for param in self.params:
            if param_dtype is None or param_dtype in _FULL:  # the parameters are their own masters
                self.masters.append(param)
                continue
            self.masters.append(param.detach().float().clone())  # before the cast: the fp32 values survive
            param.data = param.data.to(param_dtype)
        self._low = [(m, p) for m, p in zip(self.masters, self.params, strict=True) if m is not p]
        self._grad_sums: dict[int, Tensor] = {}  # fp32 gradient sums, allocated once, zeroed by one kernel a step
        options = {"lr": lr, "betas": betas, "weight_decay": weight_decay}
        self.fused = False
        if fused:
            try:
                self.optimizer = torch.optim.AdamW(self.masters, **options, fused=True)
                self.fused = True
            except (RuntimeError, ValueError):  # no fused kernel for this device or dtype
                pass
        if not self.fused:
            self.optimizer = torch.optim.AdamW(self.masters, **options)

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        return self.optimizer.param_groups

    @torch.no_grad()
    def accumulate(self) -> None:
        """Move the low-precision parameters' gradients into the fp32 master gradients (after a backward pass)."""
        adding = [(m, p) for m, p in self._low if p.grad is not None]
        for master, _ in adding:
            if master.grad is None:
                if id(master) not in self._grad_sums:
                    self._grad_sums[id(master)] = torch.zeros_like(master)
                master.grad = self._grad_sums[id(master)]
        if adding:
            torch._foreach_add_([m.grad for m, _ in adding], [p.grad for _, p in adding])
        for _, param in adding:
            param.grad = None

    @torch.no_grad()
    def step(self, max_norm: float) -> Tensor:
        """Clip the master gradients to `max_norm` (inf: no clipping), step unless the norm is not finite, write
        the masters back, clear the gradients; the norm before clipping, on the device."""
        self.accumulate()
        with_grad = [m for m in self.masters if m.grad is not None]
        if not with_grad:
            return torch.zeros((), device=self.masters[0].device)
        norm = torch.nn.utils.clip_grad_norm_(with_grad, max_norm)
        if self.fused:
            self.optimizer.found_inf = (~torch.isfinite(norm)).float()
            self.optimizer.step()
        elif torch.isfinite(norm):
            self.optimizer.step()
        if self._low:
            torch._foreach_copy_([p for _, p in self._low], [m for m, _ in self._low])
        self.zero_grad()
        return norm

    def zero_grad(self) -> None:
        if self._grad_sums:
            torch._foreach_zero_(list(self._grad_sums.values()))
        for master, param in zip(self.masters, self.params, strict=True):
            master.grad = None
            param.grad = None

    def state_dict(self) -> dict[str, Any]:
        """The inner AdamW's state, its implementation left unset (fused or not is this machine's choice, and a
        sharded run's state reads the same)."""
        state = self.optimizer.state_dict()
        neutral = {"fused": None, "foreach": None}
        return {**state, "param_groups": [{**group, **neutral} for group in state["param_groups"]]}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.optimizer.load_state_dict(self.as_own(state))

    def as_own(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """`state` (an AdamW `state_dict()`, fused or not: a sharded run's, an older checkpoint's) with this
        optimizer's implementation flags, so loading it keeps the implementation and places the step counts where
        that implementation wants them."""
        own = {key: self.optimizer.param_groups[0].get(key) for key in ("fused", "foreach")}
        return {**state, "param_groups": [{**group, **own} for group in state["param_groups"]]}

    def master_weights(self) -> dict[str, Tensor]:
        """The masters by parameter name (fp32 for bf16 parameters: what a checkpoint saves)."""
        return dict(zip(self.names, (m.detach() for m in self.masters), strict=True))

    @torch.no_grad()
    def load_master_weights(self, weights: Mapping[str, Tensor]) -> None:
        """Set every master named in `weights` (and its parameter, rounded to its dtype)."""
        for name, master, param in zip(self.names, self.masters, self.params, strict=True):
            if name in weights:
                master.copy_(weights[name])
                if param is not master:
                    param.copy_(master)
