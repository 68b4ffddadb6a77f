"""The learner's forward pass: a micro-batch → per-token log-probabilities (and entropies) under a model.

Only the positions that score a loss token are ever projected onto the vocabulary (`MicroBatch.source_N`), and
their results land in the per-sample `_S_T1` layout the objective reads (0 elsewhere). A packed micro-batch runs
as one row with per-sample positions and attention (`packing.py`, `packed_attention.py`), a padded one with its
2-D attention mask. No autocast: the model computes in its parameters' dtype (bf16 parameters under
`trainer.precision=bf16-mixed`, `precision.py`) exactly as the in-process sampler does, and log-probabilities come
out in fp32 (float64 kept) either way.

With `chunk_tokens > 0` the model runs only to its final hidden states: `output_hidden_states=-1` asks transformers
(5.x) to keep just the last one, which is the final-norm output, and `logits_to_keep=1` makes the model project a
single position onto the vocabulary. The output embedding (`get_output_embeddings()`, LoRA-wrapped or not; a peft
wrapper forwards both keywords and the lookup to the model it wraps) is then applied by `chunked_logprobs_N` to the
loss positions, a chunk at a time. That logits = output_embedding(last hidden state) is checked on the first
forward pass of each model against the one position the model did project: a model that soft-caps or scales its
logits after the projection fails with a `ConfigError` instead of training on the wrong distribution. With
`chunk_tokens = 0` the model computes all its logits in one pass (the reference computation).
"""

from __future__ import annotations

import weakref
from typing import Any

import torch
from torch import Tensor

from agentrl.errors import ConfigError
from agentrl.train.chunked_logprobs import chunked_logprobs_N, scaled_logits
from agentrl.train.losses import entropy_from_logits, token_logprobs
from agentrl.train.packed_attention import packed_inputs
from agentrl.train.samples import MicroBatch

# Logits the model and the check compute alike may still differ by a bf16 rounding (and a kernel's summation
# order); soft-capping or a logit scale moves ordinary logits by far more.
_PROJECTION_TOLERANCE = 1e-2


def forward_logprobs_B_T1(
    model: torch.nn.Module,
    batch: MicroBatch,
    *,
    temperature: float = 1.0,
    chunk_tokens: int = 0,
    entropy: str = "off",
    mask_mapping: bool = True,
) -> tuple[Tensor, Tensor | None]:
    """(log-probabilities, entropies or None) of each sample's tokens 1..L−1, fp32, S × T1, 0 off the loss mask.

    `entropy` is one of `ENTROPY_MODES`; `mask_mapping` how a packed batch passes its (absent) attention mask
    (`packed_attention.check_packing`).
    """
    if batch.segments is not None:
        inputs = packed_inputs(batch, mask_mapping=mask_mapping)
    else:
        inputs = {"input_ids": batch.input_ids_B_T, "attention_mask": batch.attention_mask_B_T}
    if chunk_tokens <= 0:
        logits_B_T_V = model(**inputs, use_cache=False).logits
        logits_N_V = scaled_logits(logits_B_T_V.flatten(0, 1).index_select(0, batch.source_N), temperature)
        logprobs_N = token_logprobs(logits_N_V, batch.targets_N)
        entropy_N = None
        if entropy != "off":
            with torch.set_grad_enabled(entropy == "grad" and torch.is_grad_enabled()):
                entropy_N = entropy_from_logits(logits_N_V)
    else:
        output = model(**inputs, use_cache=False, output_hidden_states=-1, logits_to_keep=1)
        hidden_B_T_H = output.hidden_states[-1]
        project = model.get_output_embeddings()
        if model not in _PROJECTION_CHECKED:
            _check_projection(model, project, hidden_B_T_H[:, -1:], output.logits)
            _PROJECTION_CHECKED[model] = True
        logprobs_N, entropy_N = chunked_logprobs_N(
            hidden_B_T_H.flatten(0, 1).index_select(0, batch.source_N),
            batch.targets_N,
            project,
            chunk_tokens=chunk_tokens,
            temperature=temperature,
            entropy=entropy,
        )
    return _per_sample(logprobs_N, batch), _per_sample(entropy_N, batch) if entropy_N is not None else None


def _per_sample(values_N: Tensor, batch: MicroBatch) -> Tensor:
    """Values of the N loss tokens laid out S × T1 (0 elsewhere); differentiable, no device sync."""
    shape = batch.mask_S_T1.shape
    flat = torch.zeros(shape.numel(), dtype=values_N.dtype, device=values_N.device)
    return flat.index_copy(0, batch.dest_N, values_N).view(shape)


_PROJECTION_CHECKED: weakref.WeakKeyDictionary[torch.nn.Module, bool] = weakref.WeakKeyDictionary()


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
