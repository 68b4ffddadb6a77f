"""Loss aggregation (`trainer.loss_agg`): a per-token quantity over the loss mask → the mini-batch's scalar."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from agentrl.errors import ConfigError

AggregationFn = Callable[..., Tensor]


def token_mean(
    masked_B_T: Tensor, mask_B_T: Tensor, *, num_sequences: int, num_tokens: int, norm_tokens: int
) -> Tensor:
    """Σ L·m / num_tokens — every token of the mini-batch weighs the same (DAPO, Yu et al. 2025, "DAPO: An
    Open-Source LLM Reinforcement Learning System at Scale")."""
    return masked_B_T.sum() / max(num_tokens, 1)


def seq_mean_token_mean(
    masked_B_T: Tensor, mask_B_T: Tensor, *, num_sequences: int, num_tokens: int, norm_tokens: int
) -> Tensor:
    """Σ_i (Σ_t L·m / |o_i|) / num_sequences — GRPO as written (Shao et al. 2024, "DeepSeekMath"), |o_i| the
    sequence's loss tokens; rows without loss tokens add 0 and are not counted."""
    tokens_B = mask_B_T.sum(-1).clamp(min=1).to(masked_B_T.dtype)
    return (masked_B_T.sum(-1) / tokens_B).sum() / max(num_sequences, 1)


def seq_mean_token_sum(
    masked_B_T: Tensor, mask_B_T: Tensor, *, num_sequences: int, num_tokens: int, norm_tokens: int
) -> Tensor:
    """Σ_i Σ_t L·m / num_sequences — a sequence weighs by its number of loss tokens (verl's `seq-mean-token-sum`;
    no paper). Deviation from verl: num_sequences counts the sequences with at least one loss token."""
    return masked_B_T.sum() / max(num_sequences, 1)


def seq_mean_token_sum_norm(
    masked_B_T: Tensor, mask_B_T: Tensor, *, num_sequences: int, num_tokens: int, norm_tokens: int
) -> Tensor:
    """Σ_i Σ_t L·m / (num_sequences · norm_tokens) — Dr. GRPO (Liu et al. 2025, "Understanding R1-Zero-Like
    Training"): the per-sequence 1/|o_i| is replaced by one constant MAX_TOKENS (`trainer.loss_agg_norm_tokens`,
    by default the episode token budget), which removes the length bias. Only loss-mask (policy) tokens are summed;
    prompt and tool-output tokens never count, and the constant does not depend on the batch. The 1/G mean over
    sequences is the paper's; verl's mode of this name divides the sum by the constant alone (a learning-rate
    factor of the batch size), and by default takes the padded response width for it."""
    return masked_B_T.sum() / max(num_sequences * norm_tokens, 1)


AGGREGATIONS: dict[str, AggregationFn] = {
    "token-mean": token_mean,
    "seq-mean-token-mean": seq_mean_token_mean,
    "seq-mean-token-sum": seq_mean_token_sum,
    "seq-mean-token-sum-norm": seq_mean_token_sum_norm,
}
AGGREGATION_MODES = tuple(AGGREGATIONS)


def aggregate(
    loss_B_T: Tensor,
    mask_B_T: Tensor,
    mode: str,
    *,
    num_sequences: int,
    num_tokens: int,
    norm_tokens: int,
) -> Tensor:
    """Reduce a per-token quantity over the loss mask to a scalar with the `AGGREGATIONS` entry `mode` (the modes
    of verl's `agg_loss`).

    `num_sequences` (sequences with at least one loss token) and `num_tokens` (loss tokens) are totals over the
    whole mini-batch, not over `loss_B_T`, so that summing this over the micro-batches of a mini-batch equals the
    mini-batch value; `norm_tokens` is a constant of the run. Masked positions are selected out with `where`, so a
    non-finite value there cannot leak into the result.
    """
    if mode not in AGGREGATIONS:
        raise ConfigError(f"unknown loss aggregation {mode!r}; known: {', '.join(AGGREGATIONS)}")
    mask_B_T = mask_B_T.bool()
    masked_B_T = torch.where(mask_B_T, loss_B_T, torch.zeros_like(loss_B_T))
    totals = {"num_sequences": num_sequences, "num_tokens": num_tokens, "norm_tokens": norm_tokens}
    return AGGREGATIONS[mode](masked_B_T, mask_B_T, **totals)
