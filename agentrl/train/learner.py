"""The learner: one GRPO-family training step over token-level samples.

`Learner.update(samples)` is the `update` phase of the trainer loop. Each `TrainSample` is one trajectory's
exact token sequence with its loss mask (True only on policy-sampled tokens), per-token advantages (already
credited and normalised) and the logprobs the sampler reported. One step:

1. runs `trainer.update_epochs` passes over the samples; each pass shuffles them (seeded by the step and the
   pass) and splits them into `trainer.minibatches_per_step` mini-batches, one optimizer step each;
2. packs each mini-batch into micro-batches whose padded size (rows × longest row) stays within
   `trainer.max_tokens_per_microbatch`, longest samples first so rows of similar length share a batch;
3. per micro-batch: forward (under `trainer.precision`'s autocast) to next-token logprobs in fp32, computed over
   `trainer.logprob_chunk_tokens` positions at a time (`forward.py`, `chunked_logprobs.py`), the objective of
   `objective.py` (policy loss, importance weights, KL, entropy), backward. Aggregation divides by mini-batch
   totals, so the gradients that accumulate over micro-batches are exactly the mini-batch gradient whatever the
   packing; chunking splits the positions of a micro-batch in the same way (the gradient is the sum over chunks,
   recomputed chunk by chunk), so it changes nothing but the order of float additions;
4. sets the learning rate of this optimizer step (`schedule.py`), clips the global grad norm and steps AdamW.

π_old, the denominator of every ratio, is the policy that sampled the batch *as the learner computes it*: a no-grad
pass before the step's first optimizer step (with a single optimizer step per batch that pass is the forward
itself, detached, and ρ ≡ 1). It is not the sampler's reported log-probs, although the sampler ran those same
weights: the ratio and its clip should measure how far the update has moved the policy, not the numerical gap
between two engines, and that gap (plus the staleness of carried partial rollouts) is corrected separately by
`trainer.tis_cap` / `tis_mode` with the weight π_old / π_sampler. This is the decoupled form of PPO (Hilton et al.
2022, "Batch size-invariance for policy optimization"; AReaL, Fu et al. 2025). With the in-process sampler the
two differ by ~1e-6 per token, so only remote samplers (vLLM) and carried rollouts see a difference. The pass also
compares the learner's log-probs with the sampler's (`sampler_logprob_abs_diff`, `approx_kl_to_sampler`), the
health check for token-exact rollouts.
"""

from __future__ import annotations

import dataclasses
import math
import random
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor
from torch.nn.utils.rnn import pad_sequence

from agentrl.rollout.config import RolloutConfig
from agentrl.train.config import TrainerConfig
from agentrl.train.distributed import DataParallel
from agentrl.train.forward import forward_logprobs_B_T1
from agentrl.train.fsdp import ShardedCopy, check_sharding, idle_sample
from agentrl.train.kl import kl_k3
from agentrl.train.losses import entropy_aware_advantages
from agentrl.train.objective import Objective
from agentrl.train.precision import resolve_precision
from agentrl.train.samples import PaddedSamples, TrainSample, collate, plan_microbatches, split_minibatches
from agentrl.train.schedule import check_schedule, learning_rate

# Per-token statistics averaged over all loss tokens of every pass of a step (the rest are averaged over optimizer
# steps); the objective may add more (`tis_weight`, `cov_dropped`, ...). Always logged, 0 when unused.
_TOKEN_METRICS = ("kl", "entropy", "clip_frac_low", "clip_frac_high", "clip_frac_dual")
# Measured once per step, before the first optimizer step.
_DRIFT_METRICS = ("sampler_logprob_abs_diff", "approx_kl_to_sampler")


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
    distribution; `episode_token_budget` is the run's `rollout.max_tokens_per_episode`, Dr. GRPO's constant for
    `seq-mean-token-sum-norm` unless `trainer.loss_agg_norm_tokens` sets one; `total_optimizer_steps` is the
    length of the learning-rate schedule (default: steps × minibatches_per_step × update_epochs).

    AdamW updates the parameters in their own dtype, so the weights it keeps are the master copy: fp32 unless the
    model was loaded in half precision (`policy.dtype`), which `trainer.precision` = `fp32` / `bf16-mixed` refuse.

    With `trainer.sharding = fsdp` it trains a sharded copy (`fsdp.py`, `self.train_model`) and writes the weights
    back into `model` after every update; every forward and backward is then a collective, so all ranks run as
    many micro-batches, a rank with fewer padding its count with idle ones.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        config: TrainerConfig,
        *,
        pad_token_id: int,
        ref_model: torch.nn.Module | None = None,
        temperature: float = 1.0,
        episode_token_budget: int = RolloutConfig.max_tokens_per_episode,
        total_optimizer_steps: int | None = None,
        data_parallel: DataParallel | None = None,
    ) -> None:
        check_schedule(config.lr_schedule, config.warmup_steps, config.min_lr_ratio)
        check_sharding(config, model)
        self.objective = Objective(config, episode_token_budget=episode_token_budget)
        if self.objective.needs_reference and ref_model is None and not _is_peft_model(model):
            raise ValueError(
                "trainer.kl_coef > 0 needs a reference policy: pass ref_model=..., or train a LoRA (peft) "
                "model so the reference is the base model with the adapter disabled"
            )
        self.model = model
        self.config = config
        self.dp = data_parallel or DataParallel.single()
        self.pad_token_id = pad_token_id
        self.ref_model = ref_model
        self.temperature = temperature
        self.sharded = ShardedCopy(model, cpu_offload=config.fsdp_cpu_offload) if config.sharding == "fsdp" else None
        self.train_model = self.sharded.module if self.sharded is not None else model
        # Only trainable parameters: a peft model exposes just its adapters here, with no special casing.
        self.params = [p for p in self.train_model.parameters() if p.requires_grad]
        if not self.params:
            raise ValueError("the model has no parameters with requires_grad=True")
        self.precision = resolve_precision(config.precision, self.params)
        self.total_optimizer_steps = total_optimizer_steps or config.steps * self.updates_per_batch
        self.optimizer = torch.optim.AdamW(
            self.params, lr=self._scheduled_lr(1), betas=tuple(config.betas), weight_decay=config.weight_decay
        )
        self.step = 0
        self.optimizer_steps = 0
        self.last_logprobs: dict[int, Tensor] = {}
        """This rank's log-probs of the last update's samples (index → `logprobs_T1`, position t scoring token
        t + 1) under the weights before its first optimizer step (those that sampled them, unless a partial
        rollout carried them over): the learner's side of the sampler–learner gap, for the run's trajectory log."""

    @property
    def device(self) -> torch.device:
        # the unsharded model's: CPU-offloaded shards live on the CPU but compute on this device
        return next(p for p in self.model.parameters() if p.requires_grad).device

    @property
    def updates_per_batch(self) -> int:
        """Optimizer steps per training step, as configured (fewer when a batch has fewer samples)."""
        return self.config.minibatches_per_step * self.config.update_epochs

    def update(self, samples: Sequence[TrainSample]) -> dict[str, float]:
        """One training step (`update_epochs` × `minibatches_per_step` optimizer steps) over `samples`."""
        if not samples:
            raise ValueError("Learner.update needs at least one sample")
        start = time.perf_counter()
        was_training = self.train_model.training
        self.train_model.train()
        token_sums: dict[str, float] = defaultdict(float)
        step_sums: dict[str, float] = defaultdict(float)
        epochs = self.config.update_epochs
        self.last_logprobs = {}
        try:
            minibatches = split_minibatches(len(samples), self.config.minibatches_per_step)
            # each pass's mini-batches, as indices into `samples`, and this rank's share of each
            passes = [[[order[i] for i in indices] for indices in minibatches] for order in self._orders(len(samples))]
            steps = [chosen for one_pass in passes for chosen in one_pass]  # one optimizer step each
            old_logprobs = None
            if len(steps) > 1:
                needed = {i for chosen in steps for i in self.dp.shard(chosen)}
                first = {i for chosen in passes[0] for i in self.dp.shard(chosen)}  # ranks' drift: a partition
                old_logprobs = self._old_logprobs(samples, token_sums, sorted(needed), first)
                self.last_logprobs = old_logprobs
            for chosen in steps:
                self._train_minibatch(samples, chosen, old_logprobs, token_sums, step_sums)
        finally:
            self.train_model.train(was_training)
        if self.sharded is not None:
            self.sharded.write_back()
        token_sums = self.dp.sum_floats(token_sums)  # each rank summed over its own samples
        step_sums.update(self.dp.sum_floats({k: step_sums[k] for k in ("loss", "pg_loss", "microbatches")}))
        self.step += 1
        elapsed_s = time.perf_counter() - start
        num_tokens = sum(s.num_loss_tokens for s in samples)
        updates = len(minibatches) * epochs
        metrics = {name: 0.0 for name in _TOKEN_METRICS}
        metrics.update({name: total / max(num_tokens * epochs, 1) for name, total in token_sums.items()})
        metrics.update({name: token_sums[name] / max(num_tokens, 1) for name in _DRIFT_METRICS})
        if self.config.entropy_alpha > 0:
            metrics["entropy_advantage_applied"] = step_sums["entropy_advantage_applied"] / updates
        for name in ("loss", "pg_loss", "grad_norm"):
            metrics[name] = step_sums[name] / updates
        metrics.update(
            lr=float(self.optimizer.param_groups[0]["lr"]),  # that of the step's last optimizer step
            tokens=float(num_tokens),
            sequences=float(len(samples)),
            optimizer_steps=float(updates),
            microbatches=step_sums["microbatches"],
            skipped_steps=step_sums["skipped_steps"],
            train_tokens_per_s=epochs * sum(len(s.token_ids) for s in samples) / max(elapsed_s, 1e-9),
        )
        return metrics

    def state_dict(self) -> dict[str, Any]:
        """Optimizer state and step counters, the schedule's position included (model weights are checkpointed by
        the caller). The optimizer state is an unsharded AdamW's whatever `trainer.sharding`; with fsdp this is a
        collective (every rank calls it) and only rank 0 keeps the gathered tensors (None elsewhere)."""
        if self.sharded is not None:
            optimizer = self.sharded.full_optimizer_state(self.optimizer, keep=self.dp.is_main)
        else:
            optimizer = self.optimizer.state_dict()
        return {"optimizer": optimizer, "step": self.step, "optimizer_steps": self.optimizer_steps}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore `state_dict()`; one saved before the schedule counted optimizer steps resumes the schedule at
        step × optimizer steps per batch. With fsdp the shards are re-read from the model as well, so load the
        checkpoint's weights into the model first (`load_checkpoint` does)."""
        if self.sharded is not None:
            self.sharded.reload()
            self.sharded.load_optimizer_state(self.optimizer, state["optimizer"])
        else:
            self.optimizer.load_state_dict(state["optimizer"])
        self.step = int(state["step"])
        self.optimizer_steps = int(state.get("optimizer_steps", self.step * self.updates_per_batch))

    def _orders(self, num_samples: int) -> list[list[int]]:
        """The sample order of each pass: a permutation seeded by (step, pass), so a resumed run (and every rank)
        repeats it."""
        orders = []
        for epoch in range(self.config.update_epochs):
            order = list(range(num_samples))
            if self.config.minibatches_per_step > 1:  # one mini-batch: the order changes nothing but float sums
                random.Random(self.step * 1_000_003 + epoch).shuffle(order)
            orders.append(order)
        return orders

    # --- one mini-batch --------------------------------------------------------------------------------

    def _train_minibatch(
        self,
        all_samples: Sequence[TrainSample],
        chosen: list[int],
        all_old: dict[int, Tensor] | None,
        token_sums: dict[str, float],
        step_sums: dict[str, float],
    ) -> None:
        """One optimizer step on the mini-batch `all_samples[chosen]`, of which this rank trains its share; the
        normalisers count the whole mini-batch (every rank holds it), and the ranks' gradients are summed."""
        samples = [all_samples[i] for i in chosen]
        totals = {
            "num_sequences": sum(1 for s in samples if s.num_loss_tokens > 0),
            "num_tokens": sum(s.num_loss_tokens for s in samples),
        }
        if self.config.entropy_alpha > 0:  # statistics of the whole mini-batch, before it is shared out
            samples = entropy_scaled(samples, self.config.entropy_alpha, step_sums)
        mine = self.dp.shard(range(len(chosen)))
        old_logprobs = [all_old[chosen[k]] for k in mine] if all_old is not None else None
        samples = [samples[k] for k in mine]
        plans = plan_microbatches([len(s.token_ids) for s in samples], self.config.max_tokens_per_microbatch)
        idle = self._idle_count(len(plans))
        for plan in plans:
            batch = collate([samples[i] for i in plan], self.pad_token_id, self.device)
            logprobs_B_T1, entropy_B_T1 = self._logprobs(
                self.train_model, batch, entropy="grad" if self.config.entropy_coef > 0 else "value"
            )
            if old_logprobs is not None:
                old_B_T1 = pad_sequence([old_logprobs[i] for i in plan], batch_first=True)
            else:
                old_B_T1 = logprobs_B_T1.detach()
                self._record_sampler_drift(old_B_T1, batch, token_sums)
                for row, i in enumerate(plan):  # one optimizer step: these are the sampling weights' log-probs
                    self.last_logprobs[chosen[mine[i]]] = old_B_T1[row, : len(samples[i].token_ids) - 1]
            ref_B_T1 = self._reference_logprobs(batch) if self.objective.needs_reference else None
            loss, pg_loss = self.objective(batch, logprobs_B_T1, old_B_T1, entropy_B_T1, ref_B_T1, totals, token_sums)
            loss.backward()
            step_sums["loss"] += float(loss.detach())
            step_sums["pg_loss"] += float(pg_loss.detach())
        self._idle_passes(idle, all_samples[chosen[0]], backward=True)
        step_sums["microbatches"] += len(plans)
        if self.sharded is None:  # FSDP sums them itself, in the backward passes
            self.dp.sum_gradients(self.params)
        grad_norm = self._optimizer_step()
        step_sums["grad_norm"] += grad_norm
        step_sums["skipped_steps"] += float(not math.isfinite(grad_norm))

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
    def _old_logprobs(
        self, samples: Sequence[TrainSample], token_sums: dict[str, float], needed: list[int], recorded: set[int]
    ) -> dict[int, Tensor]:
        """Logprobs of `samples[needed]` under the weights before this step's first optimizer step; the sampler
        drift is recorded over `samples[recorded]`."""
        old: dict[int, Tensor] = {}
        lengths = [len(samples[i].token_ids) for i in needed]
        plans = plan_microbatches(lengths, self.config.max_tokens_per_microbatch)
        idle = self._idle_count(len(plans))
        for plan in plans:
            batch = collate([samples[needed[k]] for k in plan], self.pad_token_id, self.device)
            logprobs_B_T1 = self._logprobs(self.train_model, batch)[0]
            drift_B_T1 = torch.tensor([needed[k] in recorded for k in plan], device=batch.mask_B_T1.device)[:, None]
            drift = dataclasses.replace(batch, mask_B_T1=batch.mask_B_T1 & drift_B_T1)
            self._record_sampler_drift(logprobs_B_T1, drift, token_sums)
            for row, k in enumerate(plan):
                old[needed[k]] = logprobs_B_T1[row, : lengths[k] - 1]
        self._idle_passes(idle, samples[0], backward=False)
        return old

    def _idle_count(self, planned: int) -> int:
        """With fsdp, the micro-batches this rank runs idle after its `planned` ones so that it runs as many as the
        busiest rank: each forward and backward gathers and reduces shards with every other rank."""
        return self.dp.max_int(planned) - planned if self.sharded is not None else 0

    def _idle_passes(self, count: int, sample: TrainSample, *, backward: bool) -> None:
        """`count` micro-batches that change nothing: the loss is the log-probs times 0, so the backward is real
        (its hooks fire) and its gradients are zeros; no statistic counts them."""
        if count <= 0:
            return
        batch = collate([idle_sample(sample)], self.pad_token_id, self.device)
        for _ in range(count):
            logprobs_B_T1 = self._logprobs(self.train_model, batch)[0]
            if backward:
                (logprobs_B_T1.sum() * 0.0).backward()

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
