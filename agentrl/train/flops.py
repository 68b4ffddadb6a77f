"""The model FLOPs of one `Learner.update`, for model FLOPs utilisation (MFU): what the update must compute, not
what it recomputes.

Per token of a sample of length L, with N the parameters of the decoder body (every matrix but the embeddings and
the output layer), a the attention width (heads × head dim) and ℓ the layers: a forward pass costs 2·N plus
4·ℓ·a·L for attention (scores and values over the whole sequence, PaLM's convention: no discount for the causal
mask, so figures compare with Megatron's and PaLM's), and the output layer 2·H·V, which the learner computes only
at loss tokens (`forward.py`); a backward pass twice the forward. One update runs:

- `update_epochs` training passes (forward and backward) over every sample, as `minibatches_per_step` optimizer
  steps;
- one π_old forward pass over every sample when it takes more than one optimizer step (`learner.py`);
- one reference forward pass per training pass with a KL term (`trainer.kl_coef > 0`).

Activation checkpointing and the chunked log-prob's recompute are not counted (they are the price of memory, which
MFU charges to the run); AdamW's elementwise work (about 16 FLOPs per parameter and step) is negligible beside it
but its time is in the measured wall clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentrl.train.config import TrainerConfig
from agentrl.train.samples import TrainSample


def forward_flops(model: Any, lengths: Sequence[int], loss_tokens: int) -> float:
    """FLOPs of one forward pass over samples of `lengths` with `loss_tokens` positions projected on the vocabulary."""
    config = getattr(model, "config", None)
    config = getattr(config, "text_config", None) or config
    hidden, vocab = int(config.hidden_size), int(config.vocab_size)
    layers = int(config.num_hidden_layers)
    head_dim = int(getattr(config, "head_dim", None) or hidden // config.num_attention_heads)
    width = int(config.num_attention_heads) * head_dim
    embeddings = {id(m.weight) for m in (model.get_input_embeddings(), model.get_output_embeddings()) if m is not None}
    body = sum(p.numel() for p in model.parameters() if p.dim() >= 2 and id(p) not in embeddings)
    tokens = sum(lengths)
    attention = sum(4 * layers * width * n * n for n in lengths)
    return 2.0 * body * tokens + attention + 2.0 * hidden * vocab * loss_tokens


def update_flops(model: Any, samples: Sequence[TrainSample], config: TrainerConfig) -> dict[str, float]:
    """Model FLOPs of one `Learner.update(samples)` under `config`: `training` (forward and backward, every epoch),
    `old_policy` (the π_old pass), `reference` (the KL term's passes) and their `total`."""
    lengths = [len(s.token_ids) for s in samples]
    forward = forward_flops(model, lengths, sum(s.num_loss_tokens for s in samples))
    epochs = config.update_epochs
    optimizer_steps = min(config.minibatches_per_step, len(samples)) * epochs
    out = {
        "training": 3.0 * forward * epochs,
        "old_policy": forward if optimizer_steps > 1 else 0.0,
        "reference": forward * epochs if config.kl_coef > 0 else 0.0,
    }
    out["total"] = sum(out.values())
    return out
