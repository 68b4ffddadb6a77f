"""The learner's statistics: summed on the device during an update, read back once, averaged into its metrics."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from agentrl.train.kl import kl_k3
from agentrl.train.samples import MicroBatch, TrainSample

TOKEN_METRICS = ("kl", "entropy", "sampler_entropy", "clip_frac_low", "clip_frac_high", "clip_frac_dual")
"""Per-token statistics averaged over all loss tokens of every pass of a step (the rest are averaged over optimizer
steps); the objective may add more (`tis_weight`, `cov_dropped`, ...). Always logged, 0 when unused."""
DRIFT_METRICS = ("sampler_logprob_abs_diff", "approx_kl_to_sampler")
"""Measured once per step, before the first optimizer step."""


def add(sums: dict[str, Any], name: str, value: Any) -> None:
    """`sums[name] += value` (a device tensor stays on the device)."""
    sums[name] = sums[name] + value if name in sums else value


def masked_sum(values_B_T: Tensor, mask_B_T: Tensor) -> Tensor:
    return torch.where(mask_B_T, values_B_T.detach(), 0.0).sum()


def record_sampler_drift(
    logprobs_B_T1: Tensor, batch: MicroBatch, token_sums: dict[str, Any], rows: list[int] | None = None
) -> None:
    """Add the learner–sampler log-prob gap of `batch` (of its `rows` only, when given) to `token_sums`; k3 with the
    sampler as the sampling distribution estimates KL(sampler ‖ learner)."""
    sampler_B_T1, mask_B_T1 = batch.sampler_logprobs_B_T1, batch.mask_B_T1
    if rows is not None:  # only some samples count (several ranks): the rest are another rank's
        index = torch.tensor(rows, dtype=torch.long).to(mask_B_T1.device, non_blocking=True)
        logprobs_B_T1, sampler_B_T1, mask_B_T1 = (
            t.index_select(0, index) for t in (logprobs_B_T1, sampler_B_T1, mask_B_T1)
        )
    add(token_sums, "sampler_logprob_abs_diff", masked_sum((logprobs_B_T1 - sampler_B_T1).abs(), mask_B_T1))
    add(token_sums, "approx_kl_to_sampler", masked_sum(kl_k3(sampler_B_T1, logprobs_B_T1), mask_B_T1))


def on_host(*sums: dict[str, Any]) -> list[dict[str, float]]:
    """The dicts with their device tensors read back in one transfer (and their Python numbers as floats)."""
    keys = [(k, name) for k, d in enumerate(sums) for name, v in d.items() if isinstance(v, Tensor)]
    values = torch.stack([sums[k][name].detach().reshape(()) for k, name in keys]).tolist() if keys else []
    out = [{name: float(v) for name, v in d.items() if not isinstance(v, Tensor)} for d in sums]
    for (k, name), value in zip(keys, values, strict=True):
        out[k][name] = value
    return out


def update_metrics(
    samples: Sequence[TrainSample],
    token_sums: dict[str, float],
    step_sums: dict[str, float],
    *,
    updates: int,
    epochs: int,
    lr: float,
    elapsed_s: float,
    entropy_advantage: bool,
) -> dict[str, float]:
    """One update's metrics from its sums (on the host, summed over the ranks)."""
    num_tokens = sum(s.num_loss_tokens for s in samples)
    metrics = {name: 0.0 for name in TOKEN_METRICS}
    metrics.update({name: total / max(num_tokens * epochs, 1) for name, total in token_sums.items()})
    metrics.update({name: token_sums.get(name, 0.0) / max(num_tokens, 1) for name in DRIFT_METRICS})
    if entropy_advantage:
        metrics["entropy_advantage_applied"] = step_sums.get("entropy_advantage_applied", 0.0) / updates
    for name in ("loss", "pg_loss", "grad_norm"):
        metrics[name] = step_sums.get(name, 0.0) / updates
    metrics.update(
        lr=lr,  # that of the step's last optimizer step
        tokens=float(num_tokens),
        sequences=float(len(samples)),
        optimizer_steps=float(updates),
        microbatches=step_sums.get("microbatches", 0.0),
        skipped_steps=step_sums.get("skipped_steps", 0.0),
        train_tokens_per_s=epochs * sum(len(s.token_ids) for s in samples) / max(elapsed_s, 1e-9),
    )
    return metrics
