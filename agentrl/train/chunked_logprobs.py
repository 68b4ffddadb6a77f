"""Target-token log-probabilities and entropies from final hidden states, projected a chunk of positions at a time.

The one-pass way projects every position onto the vocabulary at once: an N×V logits tensor (N positions, V the
vocabulary) upcast to fp32, with the softmax-sized tensors autograd keeps beside it for the backward pass; at 16k
positions and a 152k vocabulary each is 10 GB. `chunked_logprobs_N` projects `chunk_tokens` positions at a time,
each chunk under `torch.utils.checkpoint`: the forward pass keeps only each chunk's N-sized results, and the
backward pass recomputes one chunk's logits at a time. Within a chunk, `_TargetLogprob` keeps the chunk's fp32
log-probabilities and turns them into the gradient of the logits in place instead of autograd's chain of C×V
tensors, so a chunk peaks at about two C×V tensors where the one-pass path peaks at about four N×V ones
(`agentrl bench learner` measures both). The price is one more projection per chunk in the backward pass.

Exact up to float rounding: a position's log-probability and entropy depend on its own row of logits alone, so
splitting the rows changes no result; the hidden states' gradient is the chunks' gradients side by side and the
projection weight's gradient their sum, differing from the one-pass sum only in the order of float additions. Per
row, `_TargetLogprob` evaluates the one-pass formulas (a log-softmax in fp32) and their closed-form gradients
∂ log p_y/∂z = onehot(y) − p and ∂H/∂z = −p ⊙ (log p + H), which the tests hold to autograd's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor
from torch.utils.checkpoint import checkpoint

ENTROPY_MODES = ("off", "value", "grad")
"""What to compute of the entropy: nothing, its value without a graph (a metric), or its value with a gradient."""


def chunked_logprobs_N(
    hidden_N_H: Tensor,
    targets_N: Tensor,
    project: Callable[[Tensor], Tensor],
    *,
    chunk_tokens: int,
    temperature: float = 1.0,
    entropy: str = "off",
) -> tuple[Tensor, Tensor | None]:
    """(log π(target), entropy or None) at each of N positions, in fp32, with logits = project(hidden) / temperature.

    `project` maps hidden states to logits (the model's output embedding, LoRA-wrapped or not); under autocast it
    runs in the autocast dtype, as in the model's own forward, and everything after it in fp32 (float64 inputs stay
    float64). `entropy` is one of `ENTROPY_MODES`; `value` computes it in the same pass over each chunk's logits as
    the log-probabilities, without a graph.
    """
    if chunk_tokens <= 0:
        raise ValueError(f"chunk_tokens must be positive, got {chunk_tokens}")
    if entropy not in ENTROPY_MODES:
        raise ValueError(f"entropy must be one of {ENTROPY_MODES}, got {entropy!r}")
    recompute = torch.is_grad_enabled()
    logprobs: list[Tensor] = []
    entropies: list[Tensor] = []
    # An empty input still runs one (empty) chunk, so the result stays attached to the graph.
    for start in range(0, max(hidden_N_H.shape[0], 1), chunk_tokens):
        args = (hidden_N_H[start : start + chunk_tokens], targets_N[start : start + chunk_tokens])
        if recompute:
            logprobs_C, entropy_C = checkpoint(_ChunkOnce(project, temperature, entropy), *args, use_reentrant=False)
        else:
            logprobs_C, entropy_C = _chunk(*args, project, temperature, entropy)
        logprobs.append(logprobs_C)
        if entropy_C is not None:
            entropies.append(entropy_C)
    return torch.cat(logprobs), torch.cat(entropies) if entropies else None


def scaled_logits(logits_V: Tensor, temperature: float) -> Tensor:
    """Logits (any leading shape) in fp32, float64 kept, divided by the temperature after the upcast, not before."""
    if logits_V.dtype not in (torch.float32, torch.float64):
        logits_V = logits_V.float()
    return logits_V / temperature if temperature != 1.0 else logits_V


class _ChunkOnce:
    """`_chunk` as the checkpointed function: its backward-pass recompute skips an entropy that has no gradient
    (the value was taken in the forward pass)."""

    def __init__(self, project: Callable[[Tensor], Tensor], temperature: float, entropy: str) -> None:
        self.project, self.temperature, self.entropy = project, temperature, entropy

    def __call__(self, hidden_C_H: Tensor, targets_C: Tensor) -> tuple[Tensor, Tensor | None]:
        entropy, self.entropy = self.entropy, self.entropy if self.entropy == "grad" else "off"
        return _chunk(hidden_C_H, targets_C, self.project, self.temperature, entropy)


def _chunk(
    hidden_C_H: Tensor, targets_C: Tensor, project: Callable[[Tensor], Tensor], temperature: float, entropy: str
) -> tuple[Tensor, Tensor | None]:
    logits_C_V = project(hidden_C_H)
    if temperature != 1.0:
        logits_C_V = scaled_logits(logits_C_V, temperature)
    with torch.autocast(logits_C_V.device.type, enabled=False):
        return _TargetLogprob.apply(logits_C_V, targets_C, entropy)


class _TargetLogprob(torch.autograd.Function):
    """log softmax(z)[target] and, unless `entropy` is `off`, the entropy of softmax(z), in fp32 (float64 kept)
    whatever the dtype of the logits z; the gradient comes back in z's dtype.

    Full-size (C×V) work, forward: one fused log-softmax that reads z in its own dtype and writes fp32 (no separate
    upcast, max, subtract, exp and sum kernels), plus an exp and a row-wise dot product for the entropy when asked;
    backward, without an entropy gradient: exp and scale in place over the saved log-probabilities (a scatter adds
    the target terms) and the cast back to z's dtype.
    """

    @staticmethod
    def forward(ctx: Any, logits_C_V: Tensor, targets_C: Tensor, entropy: str) -> tuple[Tensor, Tensor | None]:
        ctx.set_materialize_grads(False)
        dtype = torch.float64 if logits_C_V.dtype == torch.float64 else torch.float32
        logp_C_V = torch.log_softmax(logits_C_V, dim=-1, dtype=dtype)
        logprobs_C = logp_C_V.gather(-1, targets_C[:, None]).squeeze(-1)
        entropy_C = None
        if entropy != "off":
            # −Σ p log p as one dot product per row (no C×V product); a −inf logit (p = 0) would make it nan
            entropy_C = -torch.bmm(logp_C_V.exp()[:, None, :], logp_C_V[:, :, None]).view(-1)
            if entropy != "grad":
                ctx.mark_non_differentiable(entropy_C)
        ctx.logits_dtype = logits_C_V.dtype
        ctx.save_for_backward(logp_C_V, targets_C, entropy_C if entropy == "grad" else None)
        return logprobs_C, entropy_C

    @staticmethod
    def backward(ctx: Any, grad_logprobs_C: Tensor | None, grad_entropy_C: Tensor | None) -> tuple[Any, ...]:
        logp_C_V, targets_C, entropy_C = ctx.saved_tensors
        if grad_logprobs_C is None and grad_entropy_C is None:
            return None, None, None
        if grad_entropy_C is not None and entropy_C is not None:
            # ∂H/∂z = −p ⊙ (log p + H);  ∂ log p_y/∂z = onehot(y) − p
            weight_C_V = logp_C_V.nan_to_num(neginf=0.0).add_(entropy_C[:, None]).mul_(grad_entropy_C[:, None])
            if grad_logprobs_C is not None:
                weight_C_V.add_(grad_logprobs_C[:, None])
            grad_C_V = logp_C_V.exp().mul_(weight_C_V).neg_()
        else:  # in place: the saved log-probabilities are this chunk's recompute, used once
            grad_C_V = logp_C_V.exp_().mul_(-grad_logprobs_C[:, None])
        if grad_logprobs_C is not None:
            grad_C_V.scatter_add_(-1, targets_C[:, None], grad_logprobs_C[:, None])
        return grad_C_V.to(ctx.logits_dtype), None, None
