"""The learner's forward pass: a padded micro-batch → per-token log-probabilities (and entropies) under a model.

With `chunk_tokens > 0` the model runs only to its final hidden states: `output_hidden_states=-1` asks transformers
(5.x) to keep just the last one, which is the final-norm output, and `logits_to_keep=1` makes the model project a
single position onto the vocabulary. The output embedding (`get_output_embeddings()`, LoRA-wrapped or not; a peft
wrapper forwards both keywords and the lookup to the model it wraps) is then applied by `chunked_logprobs_N` to the
positions the loss reads, a chunk at a time. That logits = output_embedding(last hidden state) is checked on every
forward pass against the one position the model did project: a model that soft-caps or scales its logits after the
projection fails with a `ConfigError` instead of training on the wrong distribution. With `chunk_tokens = 0` the
model computes all its logits in one pass (the reference computation).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from agentrl.errors import ConfigError
from agentrl.train.chunked_logprobs import chunked_logprobs_N, scaled_logits
from agentrl.train.losses import entropy_from_logits, token_logprobs
from agentrl.train.precision import autocast
from agentrl.train.samples import PaddedSamples

# Logits the model and the check compute alike may still differ by a bf16 rounding (and a kernel's summation
# order); soft-capping or a logit scale moves ordinary logits by far more.
_PROJECTION_TOLERANCE = 1e-2


def forward_logprobs_B_T1(
    model: torch.nn.Module,
    batch: PaddedSamples,
    *,
    precision: str,
    temperature: float = 1.0,
    chunk_tokens: int = 0,
    entropy: str = "off",
) -> tuple[Tensor, Tensor | None]:
    """(log-probabilities, entropies or None) of tokens 1..T−1 of `batch`, fp32, on the batch's device.

    `precision` is a resolved `trainer.precision`; `entropy` one of `ENTROPY_MODES`. Chunked, only positions under
    `batch.mask_B_T1` are projected, the rest are 0: every consumer of these values reads them through that mask.
    """
    device = batch.input_ids_B_T.device  # the compute device (a CPU-offloaded FSDP model's parameters live on the CPU)
    inputs = {
        "input_ids": batch.input_ids_B_T.to(device),
        "attention_mask": batch.attention_mask_B_T.to(device),
        "use_cache": False,
    }
    targets_B_T1 = batch.targets_B_T1.to(device)
    with autocast(precision, device):
        if chunk_tokens <= 0:
            logits_B_T1_V = scaled_logits(model(**inputs).logits[:, :-1], temperature)
            logprobs_B_T1 = token_logprobs(logits_B_T1_V, targets_B_T1)
            entropy_B_T1 = None
            if entropy != "off":
                with torch.set_grad_enabled(entropy == "grad" and torch.is_grad_enabled()):
                    entropy_B_T1 = entropy_from_logits(logits_B_T1_V)
        else:
            logprobs_B_T1, entropy_B_T1 = _chunked(
                model,
                inputs,
                targets_B_T1,
                batch.mask_B_T1.to(device),
                temperature=temperature,
                chunk_tokens=chunk_tokens,
                entropy=entropy,
            )
    out = batch.targets_B_T1.device
    return logprobs_B_T1.to(out), entropy_B_T1.to(out) if entropy_B_T1 is not None else None


def _chunked(
    model: torch.nn.Module,
    inputs: dict[str, Any],
    targets_B_T1: Tensor,
    mask_B_T1: Tensor,
    *,
    temperature: float,
    chunk_tokens: int,
    entropy: str,
) -> tuple[Tensor, Tensor | None]:
    output = model(**inputs, output_hidden_states=-1, logits_to_keep=1)
    hidden_B_T_H = output.hidden_states[-1]
    project = model.get_output_embeddings()
    _check_projection(model, project, hidden_B_T_H[:, -1:], output.logits)
    logprobs_N, entropy_N = chunked_logprobs_N(
        hidden_B_T_H[:, :-1][mask_B_T1],
        targets_B_T1[mask_B_T1],
        project,
        chunk_tokens=chunk_tokens,
        temperature=temperature,
        entropy=entropy,
    )
    zeros_B_T1 = torch.zeros(mask_B_T1.shape, dtype=logprobs_N.dtype, device=mask_B_T1.device)
    logprobs_B_T1 = zeros_B_T1.masked_scatter(mask_B_T1, logprobs_N)
    return logprobs_B_T1, zeros_B_T1.masked_scatter(mask_B_T1, entropy_N) if entropy_N is not None else None


@torch.no_grad()
def _check_projection(model: torch.nn.Module, project: Any, hidden_B_1_H: Tensor, logits_B_1_V: Tensor) -> None:
    if project is None:
        raise ConfigError(
            f"{type(model).__name__} has no output embedding to project hidden states with: set "
            "trainer.logprob_chunk_tokens=0"
        )
    ours_B_1_V = project(hidden_B_1_H).float()
    theirs_B_1_V = logits_B_1_V.float()
    error = float((ours_B_1_V - theirs_B_1_V).abs().max())
    if not error <= _PROJECTION_TOLERANCE * (1.0 + float(theirs_B_1_V.abs().max())):
        raise ConfigError(
            f"{type(model).__name__}'s logits are not its output embedding of its last hidden state (off by up "
            f"to {error:.3g}: soft-capped or scaled logits?), so they cannot be computed in chunks: set "
            "trainer.logprob_chunk_tokens=0"
        )
