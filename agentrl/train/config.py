"""`TrainerConfig`: the learner's advantages, loss and optimisation."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TrainerConfig:
    """The learner: advantages, loss and optimisation."""

    steps: int = 100
    """Training steps (one collect → update cycle each)."""
    max_minutes: float | None = None
    """Stop after this much wall time (checked between steps); None = no limit."""
    lr: float = 2e-4
    """AdamW learning rate (the peak of `lr_schedule`)."""
    lr_schedule: str = "constant"
    """Learning rate after warm-up: `constant`, or `cosine` (down to `min_lr_ratio` × lr at the last step)."""
    warmup_steps: int = 0
    """Optimizer steps of linear warm-up from 0 to lr."""
    min_lr_ratio: float = 0.0
    """Floor of the cosine schedule, as a fraction of lr."""
    precision: str = "auto"
    """Precision of the learner: `auto` (bf16-mixed on a GPU that supports bf16; fp32 elsewhere, or bf16 where the
    weights were loaded in half precision), `fp32`, `bf16-mixed` (bf16 parameters, which the forward and backward
    passes and the in-process sampler compute with, and fp32 master weights, gradient sums and AdamW state, so
    updates far below bf16's resolution still apply) or `bf16` (whatever dtype the weights are in, no master copy)."""
    logprob_chunk_tokens: int = 4096
    """Tokens whose vocabulary-sized logits exist at once when the learner computes log-probabilities and
    entropies (chunked over the sequence, recomputed in the backward pass); 0 = the whole micro-batch at once."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    betas: tuple[float, float] = (0.9, 0.99)
    """AdamW betas."""
    max_grad_norm: float = 1.0
    """Gradient clipping threshold (global L2 norm)."""
    advantage: str = "grpo"
    """Advantage estimator, by registry name or dotted path: `grpo`, `dr_grpo`, `rloo`, `lite_ppo`, `mc_grpo`
    (median baseline, pivot left out of the loss), `ngrpo` (virtual r_max sample, `ngrpo_r_max`) or `reinforce_pp`
    (REINFORCE++: group mean, then normalised over the batch)."""
    loss: str = "ppo_clip"
    """Policy loss, by registry name or dotted path: `ppo_clip` (PPO clip-higher + dual clip), `aepo` (upper clip
    keeps a (1 + ε_high)-capped gradient), `gspo` (clip on the sequence-level ratio), `cispo` (clipped, detached IS
    weight on every token's policy gradient), `clip_cov` (PPO clip; drops the loss of a few high-covariance tokens)
    or `kl_cov` (|log-ratio| penalty on the highest-covariance tokens). The ratio is π_θ / π_old with π_old the
    weights that sampled the batch, so it is 1 on each batch's first optimizer step: `aepo`, `gspo`, `cispo` and
    `kl_cov` act only through later ones and are refused (ConfigError) when minibatches_per_step × update_epochs
    is 1; `ppo_clip` then is the plain policy gradient (GRPO with one update per batch)."""
    loss_agg: str = "token-mean"
    """Loss aggregation over the mini-batch's policy tokens: `token-mean` (DAPO: Σ / tokens), `seq-mean-token-mean`
    (GRPO: mean over sequences of each one's mean), `seq-mean-token-sum` (mean over sequences of each one's sum) or
    `seq-mean-token-sum-norm` (Dr. GRPO: mean over sequences of each one's sum / loss_agg_norm_tokens)."""
    loss_agg_norm_tokens: int = 0
    """Dr. GRPO's constant MAX_TOKENS for `seq-mean-token-sum-norm`; 0 = the episode token budget
    (rollout.max_tokens_per_episode)."""
    clip_low: float = 0.2
    """Lower clip range ε_low of the token ratio (`ppo_clip`, `aepo`, `clip_cov`; the floor of `cispo`'s weight)."""
    clip_high: float = 0.28
    """Upper clip range ε_high of the token ratio (clip-higher, DAPO; the cap of `cispo`'s weight)."""
    dual_clip: float = 3.0
    """Dual-clip constant c bounding the loss of negative-advantage tokens; 0 disables."""
    sequence_clip_low: float = 3e-4
    """`gspo`: lower clip range of the sequence-level ratio (the GSPO paper's 3e-4; clip_low is per token)."""
    sequence_clip_high: float = 4e-4
    """`gspo`: upper clip range of the sequence-level ratio (the GSPO paper's 4e-4)."""
    cov_token_fraction: float = 2e-4
    """`clip_cov` / `kl_cov`: fraction of the loss tokens (at least one) that are dropped / penalised."""
    clip_cov_bounds: tuple[float, float] = (1.0, 5.0)
    """`clip_cov`: tokens whose covariance of log-prob and advantage lies strictly inside these bounds are the
    candidates for dropping."""
    kl_cov_coef: float = 1.0
    """`kl_cov`: coefficient β of the |log π − log π_old| penalty on the chosen tokens."""
    kl_coef: float = 0.0
    """Coefficient β of the KL penalty to the reference (initial) policy; 0 loads no reference."""
    kl_estimator: str = "k3"
    """Per-token KL estimator: `k1` (log π − log π_ref), `k2` (½·its square) or `k3` (e^δ − δ − 1); as a loss
    term k2's gradient is that of KL(π ‖ π_ref), k3's that of KL(π_ref ‖ π), k1's is 0 in expectation."""
    kl_in_reward: bool = False
    """Put the KL penalty in the reward instead of the loss: each policy token's advantage becomes
    A_t − kl_coef × Σ_{s ≥ t} KL_s (its trajectory's later policy tokens, KL of the sampling weights), applied in
    the learner after credit assignment and normalisation (REINFORCE++ / InstructGPT). `k1` is the usual estimator."""
    entropy_coef: float = 0.0
    """Coefficient of the entropy bonus."""
    log_entropy: bool = False
    """Compute the learner's entropy at every loss token for the `train/entropy` metric even when entropy_coef = 0
    (two more vocabulary-sized passes per chunk of positions); `train/sampler_entropy`, the sampler's reported
    entropy, is logged either way at no cost."""
    max_tokens_per_microbatch: int = 16384
    """Tokens per forward/backward micro-batch (gradients accumulate across micro-batches): packed samples count
    their own tokens, padded rows rows × longest row. A longer sample runs alone."""
    packing: bool = True
    """Concatenate each micro-batch's samples into one row, attention confined to each sample (no padding computed);
    false, or a model whose attention cannot be packed: one right-padded row per sample."""
    minibatches_per_step: int = 4
    """Mini-batches (one optimizer step each) the batch is split into, per update epoch. Every optimizer step after
    a batch's first trains on a policy that has moved, which is where the ratio, its clip and the named losses act;
    with 1 (and update_epochs = 1) the ratio is always 1."""
    update_epochs: int = 1
    """Passes over the batch per training step (PPO epochs), all against the same π_old (the weights that sampled
    it); the samples are shuffled into mini-batches anew in every pass, seeded by the step and the pass. Optimizer
    steps per batch = minibatches_per_step × update_epochs."""
    sharding: str | None = None
    """How the learner's model is split over the processes of `--nproc N`: none (every process holds the whole
    model, gradients are summed) or `fsdp` (FSDP2 full sharding of every decoder layer and the root: parameters,
    gradients and AdamW state are split over the processes; each process also keeps an unsharded copy of the
    weights for sampling, refreshed after every update). Not for LoRA models."""
    fsdp_cpu_offload: bool = False
    """With sharding = fsdp: keep the sharded parameters, gradients and AdamW state in CPU memory between uses
    (FSDP2's CPUOffloadPolicy). Needs a GPU: refused on a machine without one."""
    skip_zero_advantage_groups: bool = True
    """Leave groups whose advantages are all zero out of the update (they carry no gradient)."""
    credit: str = "trajectory"
    """Credit assignment, by name or dotted path: `trajectory` (one `advantage` per trajectory), `igpo`
    (turn-level), `gigpo` or `hgpo` (anchor-state step groups)."""
    igpo_gamma: float = 1.0
    """IGPO discount γ over turns: a turn's advantage is its normalised reward plus γ × the next turn's."""
    igpo_norm: str = "joint"
    """IGPO reward normalisation pool: `joint`, `separate` (outcomes apart) or `per_turn_index`."""
    step_advantage_weight: float = 1.0
    """GiGPO/HGPO ω: weight of the step advantage added to the episode advantage."""
    step_gamma: float = 0.95
    """GiGPO/HGPO discount γ of the step returns."""
    step_std_norm: bool = False
    """GiGPO/HGPO: divide episode and step advantages by their group std (`mean_std_norm`)."""
    anchor_match_threshold: float = 1.0
    """GiGPO/HGPO: observations match when identical (1.0) or when their difflib ratio is ≥ this (e.g. 0.95)."""
    hgpo_history_turns: int = 2
    """HGPO K: history levels (previous observations) used to refine step groups."""
    hgpo_alpha: float = 1.0
    """HGPO level weight exponent α: level l weighs (l + 1)^α."""
    ngrpo_r_max: float = 1.0
    """NGRPO r_max: the reward of the virtual best sample added to every group's statistics (`advantage = ngrpo`);
    set it to the highest reward the run's rewards can give."""
    branch_attribution: str = "soft"
    """Credit of turns a forked trajectory shares with its parent: `soft` (each copy keeps its own advantage,
    as ARPO ships) or `hard` (the turn trains once, with the mean over the trajectories sharing it; its other
    copies leave the loss mask)."""
    entropy_advantage_alpha: float | None = None
    """AEPO entropy-aware advantage A·(1 + α·z(H)); None = 0.2 with `loss = aepo`, else 0 (off)."""
    tis_cap: float | None = None
    """Sampler-mismatch correction: weight each token's policy loss by π_old / π_sampler truncated at (or, for the
    `_mask` modes, dropped above) this cap; 0 = off. None (default) = 2.0 where sampler and learner compute in a
    precision whose log-probs differ by more than fp32 rounding: `trainer.precision` resolving to bf16-mixed or bf16
    (the default on a GPU), or a sampler that is not the in-process one (`policy.backend` vllm or openai); off (0)
    for the in-process sampler in fp32 (the CPU default), whose log-probs match the learner's to ~1e-6."""
    tis_mode: str = "token"
    """With tis_cap > 0: `token` (min(ρ_t, cap), TIS), `sequence` (min(Π_t ρ_t, cap) on the whole sequence),
    `token_mask` (ρ_t, or 0 where ρ_t is outside [tis_floor, cap]: MIS, IcePop with a floor) or `sequence_mask`
    (Π_t ρ_t, or 0 for the whole sequence outside [tis_floor, cap])."""
    tis_floor: float = 0.0
    """`_mask` tis modes: also drop tokens (sequences) whose ratio is below this; 0 = no floor (MIS). IcePop uses
    tis_floor = 0.5 with tis_cap = 5."""

    @property
    def entropy_alpha(self) -> float:
        """The effective α of the entropy-aware advantage."""
        if self.entropy_advantage_alpha is not None:
            return self.entropy_advantage_alpha
        return 0.2 if self.loss == "aepo" else 0.0
