"""The learner: one GRPO-family training step over token-level samples.

`Learner.update(samples)` is the `update` phase of the trainer loop. Each `TrainSample` is one trajectory's
exact token sequence with its loss mask (True only on policy-sampled tokens), per-token advantages (already
credited and normalised) and the logprobs the sampler reported. One step:

1. runs `trainer.update_epochs` passes over the samples; each pass shuffles them (seeded by the step and the
   pass) and splits them into `trainer.minibatches_per_step` mini-batches, one optimizer step each;
2. packs each mini-batch into micro-batches of at most `trainer.max_tokens_per_microbatch` tokens, each one row of
   concatenated samples with per-sample positions and attention (`packing.py`; right-padded rows for a model that
   cannot be packed or with `trainer.packing=false`), copied to the device in one transfer;
3. per micro-batch: forward to next-token logprobs in fp32 at the loss positions only, `trainer.logprob_chunk_tokens`
   positions at a time (`forward.py`, `chunked_logprobs.py`), the objective of `objective.py` (policy loss,
   importance weights, KL, entropy), backward, and the gradients added into the fp32 master gradients
   (`master_weights.py`). Aggregation divides by mini-batch totals, so the gradients that accumulate over
   micro-batches are exactly the mini-batch gradient whatever the packing; chunking splits the positions of a
   micro-batch in the same way, so it changes nothing but the order of float additions;
4. sets the learning rate of this optimizer step (`schedule.py`), clips the global grad norm and steps AdamW on the
   fp32 masters (`trainer.precision`, `precision.py`), a non-finite norm skipping the step on the device.

Statistics stay on the device and are read back once per update; the loop itself reads nothing back.

π_old, the denominator of every ratio, is the policy that sampled the batch *as the learner computes it*: a no-grad
pass before the step's first optimizer step (with a single optimizer step per batch that pass is the forward
itself, detached, and ρ ≡ 1). It is not the sampler's reported log-probs, although the sampler ran those same
weights: the ratio and its clip should measure how far the update has moved the policy, not the numerical gap
between two engines, and that gap (plus the staleness of carried partial rollouts) is corrected separately by
`trainer.tis_cap` / `tis_mode` with the weight π_old / π_sampler. This is the decoupled form of PPO (Hilton et al.
2022, "Batch size-invariance for policy optimization"; AReaL, Fu et al. 2025). How large the gap is depends on the
precision: with the in-process sampler in fp32 (the CPU default) the two differ by ~1e-6 per token; in bf16 (the
GPU default) by the order of 1e-3, where different kernels and batch shapes (a decode step against a packed
training row) round differently, and more with remote samplers; so `trainer.tis_cap` defaults to on exactly
there. The pass also compares the learner's log-probs with the sampler's (`sampler_logprob_abs_diff`,
`approx_kl_to_sampler`), the health check for token-exact rollouts.
"""

from __future__ import annotations

import dataclasses
import math
import random
import sys
import time
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor
from torch.nn.utils.rnn import pad_sequence

from agentrl.train.checkpointing_policy import plan_checkpointing
from agentrl.train.config import TrainerConfig
from agentrl.train.distributed import DataParallel
from agentrl.train.entropy_advantage import entropy_scaled
from agentrl.train.forward import forward_logprobs_B_T1
from agentrl.train.fsdp import ShardedCopy, check_sharding, idle_sample
from agentrl.train.importance import resolve_tis_cap
from agentrl.train.master_weights import MasterWeightAdamW
from agentrl.train.objective import Objective
from agentrl.train.packed_attention import packing_mode
from agentrl.train.packing import pack, plan_packed
from agentrl.train.precision import cast_parameters, parameter_dtype, resolve_precision
from agentrl.train.samples import MicroBatch, TrainSample, collate, plan_microbatches, split_minibatches
from agentrl.train.schedule import check_schedule, learning_rate
from agentrl.train.update_metrics import add, on_host, record_sampler_drift, update_metrics

DEFAULT_EPISODE_TOKEN_BUDGET = 1024
"""Dr. GRPO's constant for a learner built without `episode_token_budget` (the default of
`rollout.max_tokens_per_episode`, which the trainer passes)."""


class Learner:
    """Computes the GRPO-family loss over `TrainSample`s and steps AdamW on the model's trainable parameters.

    `temperature` must match the sampling temperature so learner and sampler logprobs describe the same
    distribution; `episode_token_budget` is the run's `rollout.max_tokens_per_episode`, Dr. GRPO's constant for
    `seq-mean-token-sum-norm` unless `trainer.loss_agg_norm_tokens` sets one; `total_optimizer_steps` is the
    length of the learning-rate schedule (default: steps × minibatches_per_step × update_epochs);
    `remote_sampler` says the samples come from another engine (vLLM, a server), which turns `trainer.tis_cap` on;
    `activation_checkpointing` forces recomputation on (True) or off (False), None decides by memory
    (`checkpointing_policy.py`; a model loaded with checkpointing on keeps it).

    Under `trainer.precision=bf16-mixed` the model's parameters become bf16 here (the in-process sampler shares
    them) and the optimizer keeps their fp32 masters (`master_weights.py`).

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
        episode_token_budget: int = DEFAULT_EPISODE_TOKEN_BUDGET,
        total_optimizer_steps: int | None = None,
        data_parallel: DataParallel | None = None,
        remote_sampler: bool = False,
        activation_checkpointing: bool | None = None,
    ) -> None:
        check_schedule(config.lr_schedule, config.warmup_steps, config.min_lr_ratio)
        check_sharding(config, model)
        trainable = [p for p in model.parameters() if p.requires_grad]
        if not trainable:
            raise ValueError("the model has no parameters with requires_grad=True")
        self.precision = resolve_precision(config.precision, trainable)
        self.tis_cap = resolve_tis_cap(config, self.precision, remote_sampler=remote_sampler)
        self.objective = Objective(
            dataclasses.replace(config, tis_cap=self.tis_cap), episode_token_budget=episode_token_budget
        )
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
        dtype = parameter_dtype(self.precision)
        self.recomputed_layers = plan_checkpointing(
            model,
            activation_checkpointing,
            param_dtype=dtype,
            tokens_per_microbatch=config.max_tokens_per_microbatch,
            chunk_tokens=config.logprob_chunk_tokens,
        )
        self.sharded = (
            ShardedCopy(model, cpu_offload=config.fsdp_cpu_offload, param_dtype=dtype)
            if config.sharding == "fsdp"
            else None
        )
        self.train_model = self.sharded.module if self.sharded is not None else model
        named = [(name, p) for name, p in self.train_model.named_parameters() if p.requires_grad]
        self.params = [p for _, p in named]
        self.total_optimizer_steps = total_optimizer_steps or config.steps * self.updates_per_batch
        # the masters are taken before the parameters are cast; a sharded copy's parameters are its fp32 masters
        self.optimizer = MasterWeightAdamW(
            named,
            lr=self._scheduled_lr(1),
            betas=tuple(config.betas),
            weight_decay=config.weight_decay,
            param_dtype=dtype if self.sharded is None else None,
            fused=self.sharded is None,
        )
        cast_parameters(model, dtype)
        if ref_model is not None:
            cast_parameters(ref_model, dtype)
        models = [self.train_model] + ([ref_model] if ref_model is not None else [])
        self.packing = packing_mode(models, self.device) if config.packing else None
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
        token_sums: dict[str, Any] = {}
        step_sums: dict[str, Any] = {}
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
        token_sums, step_sums = on_host(token_sums, step_sums)  # the update's one device→host transfer
        token_sums = self.dp.sum_floats(token_sums)  # each rank summed over its own samples
        step_sums.update(self.dp.sum_floats({k: step_sums.get(k, 0.0) for k in ("loss", "pg_loss", "microbatches")}))
        self.step += 1
        return update_metrics(
            samples,
            token_sums,
            step_sums,
            updates=len(minibatches) * epochs,
            epochs=epochs,
            lr=float(self.optimizer.param_groups[0]["lr"]),
            elapsed_s=time.perf_counter() - start,
            entropy_advantage=self.config.entropy_alpha > 0,
        )

    def state_dict(self) -> dict[str, Any]:
        """Optimizer state, step counters (the schedule's position included) and `weights`, the trainable
        parameters' master weights by name (fp32 for bf16 parameters: what a checkpoint saves). The optimizer state
        is an unsharded AdamW's whatever `trainer.sharding`; with fsdp this is a collective (every rank calls it)
        and only rank 0 keeps the gathered tensors (None elsewhere)."""
        if self.sharded is not None:
            optimizer = self.sharded.full_optimizer_state(self.optimizer.optimizer, keep=self.dp.is_main)
            weights = self.sharded.full_parameters(keep=self.dp.is_main)
        else:
            optimizer = self.optimizer.state_dict()
            weights = {name: w.cpu() for name, w in self.optimizer.master_weights().items()}
        return {"optimizer": optimizer, "step": self.step, "optimizer_steps": self.optimizer_steps, "weights": weights}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore `state_dict()`; one saved before the schedule counted optimizer steps resumes the schedule at
        step × optimizer steps per batch. `weights`, where given, set the master weights and the model's parameters;
        without them (an older state) the masters are re-read from the model, so load its weights first
        (`load_checkpoint` does)."""
        weights = state.get("weights")
        if self.sharded is not None:
            self.sharded.reload(weights)
            self.sharded.load_optimizer_state(self.optimizer.optimizer, self.optimizer.as_own(state["optimizer"]))
        else:
            self.optimizer.load_state_dict(state["optimizer"])
            if weights is None:
                weights = {name: p.detach() for name, p in self.train_model.named_parameters() if p.requires_grad}
            self.optimizer.load_master_weights(weights)
        if self.sharded is not None and weights is not None:
            self.sharded.write_back()
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
        token_sums: dict[str, Any],
        step_sums: dict[str, Any],
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
        plans = self._plan([len(s.token_ids) for s in samples])
        idle = self._idle_count(len(plans))
        entropy = "grad" if self.config.entropy_coef > 0 else "value" if self.config.log_entropy else "off"
        for plan in plans:
            batch = self._batch([samples[i] for i in plan])
            logprobs_B_T1, entropy_B_T1 = self._logprobs(self.train_model, batch, entropy)
            if old_logprobs is not None:
                old_B_T1 = pad_sequence([old_logprobs[i] for i in plan], batch_first=True)
            else:
                old_B_T1 = logprobs_B_T1.detach()
                record_sampler_drift(old_B_T1, batch, token_sums)
                for row, i in enumerate(plan):  # one optimizer step: these are the sampling weights' log-probs
                    self.last_logprobs[chosen[mine[i]]] = old_B_T1[row, : len(samples[i].token_ids) - 1]
            ref_B_T1 = self._reference_logprobs(batch) if self.objective.needs_reference else None
            loss, pg_loss = self.objective(batch, logprobs_B_T1, old_B_T1, entropy_B_T1, ref_B_T1, totals, token_sums)
            loss.backward()
            self.optimizer.accumulate()
            add(step_sums, "loss", loss.detach())
            add(step_sums, "pg_loss", pg_loss.detach())
        self._idle_passes(idle, all_samples[chosen[0]], backward=True)
        add(step_sums, "microbatches", float(len(plans)))
        if self.sharded is None:  # FSDP sums them itself, in the backward passes
            self.dp.sum_gradients(self.optimizer.masters)
        grad_norm = self._optimizer_step()
        add(step_sums, "grad_norm", grad_norm)
        add(step_sums, "skipped_steps", (~torch.isfinite(grad_norm)).to(grad_norm.dtype))

    def _optimizer_step(self) -> Tensor:
        """Clip, step and clear; a non-finite gradient skips the step rather than corrupting the weights."""
        self.optimizer_steps += 1
        for group in self.optimizer.param_groups:
            group["lr"] = self._scheduled_lr(self.optimizer_steps)
        max_norm = self.config.max_grad_norm if self.config.max_grad_norm > 0 else math.inf
        grad_norm = self.optimizer.step(max_norm)
        if hasattr(grad_norm, "full_tensor"):  # a sharded model's norm: the same on every rank
            grad_norm = grad_norm.full_tensor()
        return grad_norm.to(self.device)

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

    # --- micro-batches and forward passes --------------------------------------------------------------------

    def _plan(self, lengths: Sequence[int]) -> list[list[int]]:
        budget = self.config.max_tokens_per_microbatch
        return plan_packed(lengths, budget) if self.packing else plan_microbatches(lengths, budget)

    def _batch(self, samples: Sequence[TrainSample]) -> MicroBatch:
        return pack(samples, self.device) if self.packing else collate(samples, self.pad_token_id, self.device)

    def _logprobs(self, model: torch.nn.Module, batch: MicroBatch, entropy: str = "off") -> tuple[Tensor, Any]:
        """Logprobs (and entropies, per `entropy`) of each sample's tokens 1..L-1: the logits at t−1 score token t."""
        return forward_logprobs_B_T1(
            model,
            batch,
            temperature=self.temperature,
            chunk_tokens=self.config.logprob_chunk_tokens,
            entropy=entropy,
            mask_mapping=self.packing == "mapping",
        )

    @torch.no_grad()
    def _reference_logprobs(self, batch: MicroBatch) -> Tensor:
        if self.ref_model is not None:
            return self._logprobs(self.ref_model, batch)[0]
        with self.model.disable_adapter():  # type: ignore[operator]
            return self._logprobs(self.model, batch)[0]

    @torch.no_grad()
    def _old_logprobs(
        self, samples: Sequence[TrainSample], token_sums: dict[str, Any], needed: list[int], recorded: set[int]
    ) -> dict[int, Tensor]:
        """Logprobs of `samples[needed]` under the weights before this step's first optimizer step; the sampler
        drift is recorded over `samples[recorded]`."""
        old: dict[int, Tensor] = {}
        lengths = [len(samples[i].token_ids) for i in needed]
        plans = self._plan(lengths)
        idle = self._idle_count(len(plans))
        for plan in plans:
            batch = self._batch([samples[needed[k]] for k in plan])
            logprobs_B_T1 = self._logprobs(self.train_model, batch)[0]
            rows = [row for row, k in enumerate(plan) if needed[k] in recorded]
            record_sampler_drift(logprobs_B_T1, batch, token_sums, None if len(rows) == len(plan) else rows)
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
        batch = self._batch([idle_sample(sample)])
        for _ in range(count):
            logprobs_B_T1 = self._logprobs(self.train_model, batch)[0]
            if backward:
                (logprobs_B_T1.sum() * 0.0).backward()
                self.optimizer.accumulate()


def _is_peft_model(model: torch.nn.Module) -> bool:
    # Looked up rather than imported: peft is slow to import, and a model cannot be a PeftModel without it.
    peft = sys.modules.get("peft")
    return peft is not None and isinstance(model, peft.PeftModel)
