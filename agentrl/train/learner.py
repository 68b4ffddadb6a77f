"""The learner: one GRPO-family training step over token-level samples.

`Learner.update(samples)` is the `update` phase of the trainer loop. Each `TrainSample` is one trajectory's
exact token sequence with its loss mask (True only on policy-sampled tokens), per-token advantages (already
credited and normalised) and the logprobs the sampler reported. One step:

1. splits the samples, in order, into `trainer.minibatches_per_step` mini-batches (one optimizer step each);
2. packs each mini-batch into micro-batches whose padded size (rows × longest row) stays within
   `trainer.max_tokens_per_microbatch`, longest samples first so rows of similar length share a batch;
3. per micro-batch: forward (under `trainer.precision`'s autocast) to next-token logprobs in fp32, computed over
   `trainer.logprob_chunk_tokens` positions at a time (`forward.py`, `chunked_logprobs.py`),
   loss = agg(policy loss) + kl_coef·agg(k3 KL to the reference) − entropy_coef·agg(entropy), backward.
   `aggregate` divides by mini-batch totals, so the gradients that accumulate over micro-batches are exactly
   the mini-batch gradient whatever the packing; chunking splits the positions of a micro-batch in the same
   way (the gradient is the sum over chunks, recomputed chunk by chunk), so it changes nothing but the order of
   float additions;
4. sets the learning rate of this optimizer step (`schedule.py`), clips the global grad norm and steps AdamW.

With one mini-batch the old policy is the current one (ratio ≡ 1: exactly on-policy, the clip never binds);
with several, old logprobs come from a no-grad pass before the first optimizer step, as in PPO. Either way the
learner's pre-update logprobs are compared with the sampler's (`sampler_logprob_abs_diff`,
`approx_kl_to_sampler`), the health check for token-exact rollouts.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor
from torch.nn.utils.rnn import pad_sequence

from agentrl.errors import ConfigError
from agentrl.registry import resolve
from agentrl.train.config import TrainerConfig
from agentrl.train.forward import forward_logprobs_B_T1
from agentrl.train.losses import (
    AGGREGATION_MODES,
    aggregate,
    entropy_aware_advantages,
    kl_k3,
    truncated_importance_weights,
)
from agentrl.train.precision import resolve_precision
from agentrl.train.samples import PaddedSamples, TrainSample, collate, plan_microbatches, split_minibatches
from agentrl.train.schedule import check_schedule, learning_rate

# Per-token statistics averaged over all loss tokens of a step (the rest are averaged over optimizer steps).
_TOKEN_METRICS = (
    "kl",
    "entropy",
    "clip_frac_low",
    "clip_frac_high",
    "clip_frac_dual",
    "sampler_logprob_abs_diff",
    "approx_kl_to_sampler",
)


def entropy_scaled(samples: list[TrainSample], alpha: float, step_sums: dict[str, float]) -> list[TrainSample]:
    """AEPO's entropy-aware advantage over one mini-batch: A_t·(1 + α·z(H_t)), z over the mini-batch's loss tokens.

    Deviation from AEPO (which z-scores the trainer's forward-pass entropies per micro-batch): the entropies are
    the sampler's (`TrainSample.sampler_entropies`, the same distribution on-policy at the learner's
    temperature, a top-k proxy with remote samplers) and the statistics span the mini-batch, so the result does
    not depend on packing. Left unchanged when a sample has none (`entropy_advantage_applied` counts the
    mini-batches where it was applied).
    """
    if not all(s.sampler_entropies for s in samples):
        return samples
    step_sums["entropy_advantage_applied"] += 1.0
    width = max(len(s.token_ids) for s in samples)

    def rows(values: Any, dtype: torch.dtype) -> Tensor:
        return torch.tensor([list(v) + [0] * (width - len(v)) for v in values], dtype=dtype)

    mask_B_T = rows((s.loss_mask for s in samples), torch.bool)
    mask_B_T[:, 0] = False  # token 0 never has a loss
    advantages_B_T = entropy_aware_advantages(
        rows((s.advantages for s in samples), torch.float64),
        rows((s.sampler_entropies for s in samples), torch.float64),
        mask_B_T,
        alpha,
    )
    return [
        dataclasses.replace(s, advantages=tuple(advantages_B_T[b, : len(s.token_ids)].tolist()))
        for b, s in enumerate(samples)
    ]


def _masked_sum(values_B_T: Tensor, mask_B_T: Tensor) -> float:
    return float(torch.where(mask_B_T, values_B_T.detach(), 0.0).sum())


class Learner:
    """Computes the GRPO-family loss over `TrainSample`s and steps AdamW on the model's trainable parameters.

    `temperature` must match the sampling temperature so learner and sampler logprobs describe the same
    distribution; `max_tokens_per_sequence` is Dr. GRPO's constant normaliser for `seq-mean-token-sum-norm`
    (default: the longest sample of each mini-batch); `total_optimizer_steps` is the length of the learning-rate
    schedule (default: `trainer.steps × trainer.minibatches_per_step`).

    AdamW updates the parameters in their own dtype, so the weights it keeps are the master copy: fp32 unless the
    model was loaded in half precision (`policy.dtype`), which `trainer.precision` = `fp32` / `bf16-mixed` refuse.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        config: TrainerConfig,
        *,
        pad_token_id: int,
        ref_model: torch.nn.Module | None = None,
        temperature: float = 1.0,
        max_tokens_per_sequence: int | None = None,
        total_optimizer_steps: int | None = None,
    ) -> None:
        check_schedule(config.lr_schedule, config.warmup_steps, config.min_lr_ratio)
        if config.loss_agg not in AGGREGATION_MODES:
            known = ", ".join(AGGREGATION_MODES)
            raise ConfigError(f"unknown trainer.loss_agg {config.loss_agg!r}; known: {known}")
        if config.kl_coef > 0 and ref_model is None and not _is_peft_model(model):
            raise ValueError(
                "trainer.kl_coef > 0 needs a reference policy: pass ref_model=..., or train a LoRA (peft) "
                "model so the reference is the base model with the adapter disabled"
            )
        self.model = model
        self.config = config
        self.pad_token_id = pad_token_id
        self.ref_model = ref_model
        self.temperature = temperature
        self.max_tokens_per_sequence = max_tokens_per_sequence
        self.policy_loss = resolve("loss", config.loss)
        # Only trainable parameters: a peft model exposes just its adapters here, with no special casing.
        self.params = [p for p in model.parameters() if p.requires_grad]
        if not self.params:
            raise ValueError("the model has no parameters with requires_grad=True")
        self.precision = resolve_precision(config.precision, self.params)
        self.total_optimizer_steps = total_optimizer_steps or config.steps * config.minibatches_per_step
        self.optimizer = torch.optim.AdamW(
            self.params, lr=self._scheduled_lr(1), betas=tuple(config.betas), weight_decay=config.weight_decay
        )
        self.step = 0
        self.optimizer_steps = 0

    @property
    def device(self) -> torch.device:
        return self.params[0].device

    def update(self, samples: Sequence[TrainSample]) -> dict[str, float]:
        """One training step (`minibatches_per_step` optimizer steps) over `samples`; returns metrics."""
        if not samples:
            raise ValueError("Learner.update needs at least one sample")
        start = time.perf_counter()
        was_training = self.model.training
        self.model.train()
        token_sums: dict[str, float] = defaultdict(float)
        step_sums: dict[str, float] = defaultdict(float)
        try:
            old_logprobs = None
            if self.config.minibatches_per_step > 1:
                old_logprobs = self._old_logprobs(samples, token_sums)
            minibatches = split_minibatches(len(samples), self.config.minibatches_per_step)
            for indices in minibatches:
                old = [old_logprobs[i] for i in indices] if old_logprobs is not None else None
                self._train_minibatch([samples[i] for i in indices], old, token_sums, step_sums)
        finally:
            self.model.train(was_training)
        self.step += 1
        elapsed_s = time.perf_counter() - start
        num_tokens = sum(s.num_loss_tokens for s in samples)
        metrics = {name: token_sums[name] / max(num_tokens, 1) for name in _TOKEN_METRICS}
        if self.config.tis_cap > 0:
            metrics.update({name: token_sums[name] / max(num_tokens, 1) for name in ("tis_weight", "tis_capped_frac")})
        if self.config.entropy_alpha > 0:
            metrics["entropy_advantage_applied"] = step_sums["entropy_advantage_applied"] / len(minibatches)
        for name in ("loss", "pg_loss", "grad_norm"):
            metrics[name] = step_sums[name] / len(minibatches)
        metrics.update(
            lr=float(self.optimizer.param_groups[0]["lr"]),  # that of the step's last optimizer step
            tokens=float(num_tokens),
            sequences=float(len(samples)),
            microbatches=step_sums["microbatches"],
            skipped_steps=step_sums["skipped_steps"],
            train_tokens_per_s=sum(len(s.token_ids) for s in samples) / max(elapsed_s, 1e-9),
        )
        return metrics

    def state_dict(self) -> dict[str, Any]:
        """Optimizer state and step counters, the schedule's position included (model weights are checkpointed by
        the caller)."""
        return {"optimizer": self.optimizer.state_dict(), "step": self.step, "optimizer_steps": self.optimizer_steps}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore `state_dict()`; one saved before the schedule counted optimizer steps resumes the schedule at
        step × minibatches_per_step."""
        self.optimizer.load_state_dict(state["optimizer"])
        self.step = int(state["step"])
        self.optimizer_steps = int(state.get("optimizer_steps", self.step * self.config.minibatches_per_step))

    # --- one mini-batch --------------------------------------------------------------------------------

    def _train_minibatch(
        self,
        samples: list[TrainSample],
        old_logprobs: list[Tensor] | None,
        token_sums: dict[str, float],
        step_sums: dict[str, float],
    ) -> None:
        totals = {
            "num_sequences": sum(1 for s in samples if s.num_loss_tokens > 0),
            "num_tokens": sum(s.num_loss_tokens for s in samples),
            "max_tokens": self.max_tokens_per_sequence or max(len(s.token_ids) for s in samples),
        }
        if self.config.entropy_alpha > 0:
            samples = entropy_scaled(samples, self.config.entropy_alpha, step_sums)
        plans = plan_microbatches([len(s.token_ids) for s in samples], self.config.max_tokens_per_microbatch)
        for plan in plans:
            batch = collate([samples[i] for i in plan], self.pad_token_id, self.device)
            old_B_T1 = None
            if old_logprobs is not None:
                old_B_T1 = pad_sequence([old_logprobs[i] for i in plan], batch_first=True)
            loss, pg_loss = self._microbatch_loss(batch, old_B_T1, totals, token_sums)
            loss.backward()
            step_sums["loss"] += float(loss.detach())
            step_sums["pg_loss"] += float(pg_loss.detach())
        step_sums["microbatches"] += len(plans)
        grad_norm = self._optimizer_step()
        step_sums["grad_norm"] += grad_norm
        step_sums["skipped_steps"] += float(not math.isfinite(grad_norm))

    def _microbatch_loss(
        self, batch: PaddedSamples, old_B_T1: Tensor | None, totals: dict[str, int], token_sums: dict[str, float]
    ) -> tuple[Tensor, Tensor]:
        """(total loss, policy loss) of one micro-batch, each scaled to its share of the mini-batch."""
        config, mask_B_T1 = self.config, batch.mask_B_T1
        agg = functools.partial(aggregate, mask_B_T=mask_B_T1, mode=config.loss_agg, **totals)
        logprobs_B_T1, entropy_B_T1 = self._logprobs(
            self.model, batch, entropy="grad" if config.entropy_coef > 0 else "value"
        )
        if old_B_T1 is None:
            old_B_T1 = logprobs_B_T1.detach()
            self._record_sampler_drift(old_B_T1, batch, token_sums)
        loss_B_T1, stats = self.policy_loss(
            logprobs_B_T1,
            old_B_T1,
            batch.advantages_B_T1,
            clip_low=config.clip_low,
            clip_high=config.clip_high,
            dual_clip=config.dual_clip,
            mask_B_T=mask_B_T1,
        )
        if config.tis_cap > 0:
            weights_B_T1 = truncated_importance_weights(old_B_T1, batch.sampler_logprobs_B_T1, config.tis_cap)
            loss_B_T1 = loss_B_T1 * weights_B_T1
            token_sums["tis_weight"] += _masked_sum(weights_B_T1, mask_B_T1)
            token_sums["tis_capped_frac"] += _masked_sum((weights_B_T1 >= config.tis_cap).float(), mask_B_T1)
        pg_loss = agg(loss_B_T1)
        loss = pg_loss
        if config.kl_coef > 0:
            kl_B_T1 = kl_k3(logprobs_B_T1, self._reference_logprobs(batch))
            loss = loss + config.kl_coef * agg(kl_B_T1)
            token_sums["kl"] += _masked_sum(kl_B_T1, mask_B_T1)
        if config.entropy_coef > 0:
            loss = loss - config.entropy_coef * agg(entropy_B_T1)
        token_sums["entropy"] += _masked_sum(entropy_B_T1, mask_B_T1)
        for name, values_B_T1 in stats.items():
            if name.startswith("clip_frac"):
                token_sums[name] += _masked_sum(values_B_T1, mask_B_T1)
        return loss, pg_loss

    def _optimizer_step(self) -> float:
        """Clip, step and clear; a non-finite gradient skips the step rather than corrupting the weights."""
        self.optimizer_steps += 1
        for group in self.optimizer.param_groups:
            group["lr"] = self._scheduled_lr(self.optimizer_steps)
        max_norm = self.config.max_grad_norm if self.config.max_grad_norm > 0 else math.inf
        grad_norm = float(torch.nn.utils.clip_grad_norm_(self.params, max_norm))
        if math.isfinite(grad_norm):
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return grad_norm

    # --- forward passes --------------------------------------------------------------------------------

    def _scheduled_lr(self, optimizer_step: int) -> float:
        config = self.config
        return learning_rate(
            optimizer_step,
            peak_lr=config.lr,
            total_steps=self.total_optimizer_steps,
            schedule=config.lr_schedule,
            warmup_steps=config.warmup_steps,
            min_lr_ratio=config.min_lr_ratio,
        )

    def _logprobs(self, model: torch.nn.Module, batch: PaddedSamples, entropy: str = "off") -> tuple[Tensor, Any]:
        """Logprobs (and entropies, per `entropy`) of tokens 1..T-1: the logits at t−1 score token t."""
        return forward_logprobs_B_T1(
            model,
            batch,
            precision=self.precision,
            temperature=self.temperature,
            chunk_tokens=self.config.logprob_chunk_tokens,
            entropy=entropy,
        )

    @torch.no_grad()
    def _reference_logprobs(self, batch: PaddedSamples) -> Tensor:
        if self.ref_model is not None:
            return self._logprobs(self.ref_model, batch)[0]
        with self.model.disable_adapter():  # type: ignore[operator]
            return self._logprobs(self.model, batch)[0]

    @torch.no_grad()
    def _old_logprobs(self, samples: Sequence[TrainSample], token_sums: dict[str, float]) -> list[Tensor]:
        """Logprobs of every sample under the weights before this step's first optimizer step."""
        old: list[Tensor] = [torch.empty(0)] * len(samples)
        lengths = [len(s.token_ids) for s in samples]
        for plan in plan_microbatches(lengths, self.config.max_tokens_per_microbatch):
            batch = collate([samples[i] for i in plan], self.pad_token_id, self.device)
            logprobs_B_T1 = self._logprobs(self.model, batch)[0]
            self._record_sampler_drift(logprobs_B_T1, batch, token_sums)
            for row, i in enumerate(plan):
                old[i] = logprobs_B_T1[row, : lengths[i] - 1]
        return old

    @staticmethod
    def _record_sampler_drift(logprobs_B_T1: Tensor, batch: PaddedSamples, token_sums: dict[str, float]) -> None:
        # k3 with the sampler as the sampling distribution estimates KL(sampler ‖ learner).
        sampler_B_T1, mask_B_T1 = batch.sampler_logprobs_B_T1, batch.mask_B_T1
        token_sums["sampler_logprob_abs_diff"] += _masked_sum((logprobs_B_T1 - sampler_B_T1).abs(), mask_B_T1)
        token_sums["approx_kl_to_sampler"] += _masked_sum(kl_k3(sampler_B_T1, logprobs_B_T1), mask_B_T1)


def _is_peft_model(model: torch.nn.Module) -> bool:
    # Looked up rather than imported: peft is slow to import, and a model cannot be a PeftModel without it.
    peft = sys.modules.get("peft")
    return peft is not None and isinstance(model, peft.PeftModel)
