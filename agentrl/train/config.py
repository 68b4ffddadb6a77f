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
    """Compute precision of the learner: `auto` (bf16-mixed on a GPU that supports bf16, fp32 otherwise), `fp32`,
    `bf16-mixed` (bf16 autocast over fp32 weights and optimizer state) or `bf16` (no autocast: whatever dtype the
    weights are in)."""
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
    (median baseline, pivot left out of the loss) or `ngrpo` (virtual r_max sample)."""
    loss: str = "ppo_clip"
    """Policy loss, by registry name or dotted path: `ppo_clip`, `aepo` (gradient-keeping upper clip) or `gspo`
    (sequence-level ratio)."""
    loss_agg: str = "token-mean"
    """Loss aggregation: `token-mean`, `seq-mean-token-mean` or `seq-mean-token-sum-norm`."""
    clip_low: float = 0.2
    """Lower PPO clip range ε_low."""
    clip_high: float = 0.28
    """Upper PPO clip range ε_high (clip-higher, DAPO)."""
    dual_clip: float = 3.0
    """Dual-clip constant c bounding the loss of negative-advantage tokens; 0 disables."""
    kl_coef: float = 0.0
    """Coefficient of the k3 KL penalty to the reference (initial) policy; 0 loads no reference."""
    entropy_coef: float = 0.0
    """Coefficient of the entropy bonus."""
    max_tokens_per_microbatch: int = 16384
    """Padded tokens per forward/backward micro-batch (gradients accumulate across micro-batches)."""
    minibatches_per_step: int = 1
    """Optimizer steps per training step (the batch is split into this many mini-batches)."""
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
    branch_attribution: str = "soft"
    """Credit of turns a forked trajectory shares with its parent: `soft` (each copy keeps its own advantage,
    as ARPO ships) or `hard` (every copy gets the mean over the trajectories sharing it)."""
    entropy_advantage_alpha: float | None = None
    """AEPO entropy-aware advantage A·(1 + α·z(H)); None = 0.2 with `loss = aepo`, else 0 (off)."""
    tis_cap: float = 0.0
    """Truncated importance sampling: weight each token's policy loss by min(π_old / π_sampler, cap); 0 = off."""

    @property
    def entropy_alpha(self) -> float:
        """The effective α of the entropy-aware advantage."""
        if self.entropy_advantage_alpha is not None:
            return self.entropy_advantage_alpha
        return 0.2 if self.loss == "aepo" else 0.0
