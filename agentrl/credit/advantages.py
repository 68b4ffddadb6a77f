"""Group-relative advantage estimators: outcome rewards of a group → one advantage per trajectory.

Every estimator has the same signature and is a pure tensor function:

    fn(rewards_B, group_index_B, *, eps=1e-6) -> advantages_B

`rewards_B` holds one scalar reward per trajectory of the batch and `group_index_B` the group (task) each
trajectory belongs to, as integers 0..K-1 in any order (groups may be interleaved). Group statistics are
computed with `index_add_`, so there is no Python loop over groups. Estimators are registered by name in
`ADVANTAGE_ESTIMATORS` (`trainer.advantage = "grpo"`); `agentrl.registry.resolve("advantage", name)` also
accepts an import path to a user function with the same signature. An estimator may take further keyword
options that the trajectory credit assigner fills from the config: `r_max` (NGRPO) from `trainer.ngrpo_r_max`.

Shared convention: a group whose rewards are all equal carries no learning signal and gets advantages of
exactly 0 (not merely ≈ 0 after floating-point mean subtraction), so callers can drop such groups by testing
for zeros.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

AdvantageFn = Callable[..., Tensor]

ADVANTAGE_ESTIMATORS: dict[str, AdvantageFn] = {}


def register_advantage(name: str) -> Callable[[AdvantageFn], AdvantageFn]:
    """Register an estimator under `name` (the value of `trainer.advantage`)."""

    def decorator(fn: AdvantageFn) -> AdvantageFn:
        if name in ADVANTAGE_ESTIMATORS:
            raise ValueError(f"advantage estimator {name!r} is already registered")
        ADVANTAGE_ESTIMATORS[name] = fn
        return fn

    return decorator


# --- group statistics ------------------------------------------------------------------------------------


def _as_float(rewards_B: Tensor) -> Tensor:
    return rewards_B if rewards_B.is_floating_point() else rewards_B.to(torch.get_default_dtype())


def _group_sum(values_B: Tensor, group_index_B: Tensor, num_groups: int) -> Tensor:
    return values_B.new_zeros(num_groups).index_add_(0, group_index_B, values_B)


def _group_stats(rewards_B: Tensor, group_index_B: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Per-trajectory (group size, group sum, group mean, group population std), each of shape B."""
    num_groups = int(group_index_B.max()) + 1 if group_index_B.numel() else 0
    count_K = _group_sum(torch.ones_like(rewards_B), group_index_B, num_groups)
    sum_K = _group_sum(rewards_B, group_index_B, num_groups)
    mean_K = sum_K / count_K.clamp(min=1)
    centered_B = rewards_B - mean_K[group_index_B]
    var_K = _group_sum(centered_B.square(), group_index_B, num_groups) / count_K.clamp(min=1)
    return count_K[group_index_B], sum_K[group_index_B], mean_K[group_index_B], var_K.sqrt()[group_index_B]


def _constant_group_B(rewards_B: Tensor, group_index_B: Tensor) -> Tensor:
    """True for trajectories whose whole group shares one reward (compared exactly, via max == min)."""
    num_groups = int(group_index_B.max()) + 1 if group_index_B.numel() else 0
    max_K = rewards_B.new_full((num_groups,), -torch.inf).scatter_reduce(0, group_index_B, rewards_B, "amax")
    min_K = rewards_B.new_full((num_groups,), torch.inf).scatter_reduce(0, group_index_B, rewards_B, "amin")
    return (max_K == min_K)[group_index_B]


def _zero_constant_groups(advantages_B: Tensor, rewards_B: Tensor, group_index_B: Tensor) -> Tensor:
    return torch.where(_constant_group_B(rewards_B, group_index_B), 0.0, advantages_B)


# --- estimators ------------------------------------------------------------------------------------------


@register_advantage("grpo")
def grpo(rewards_B: Tensor, group_index_B: Tensor, *, eps: float = 1e-6) -> Tensor:
    """GRPO outcome advantage: A_i = (r_i − mean_G r) / (std_G r + eps).

    Shao et al. 2024, "DeepSeekMath: Pushing the Limits of Mathematical Reasoning in Open Language Models".
    Deviation: std is the *population* std (divide by G), not the sample std (G − 1) that verl's
    `torch.std` uses; with population std the normalised group has std exactly 1 (up to eps), e.g.
    rewards [1, 0, 0, 1] → [+1, −1, −1, +1]. A group with σ = 0 gets advantages 0.
    """
    rewards_B = _as_float(rewards_B)
    _, _, mean_B, std_B = _group_stats(rewards_B, group_index_B)
    return _zero_constant_groups((rewards_B - mean_B) / (std_B + eps), rewards_B, group_index_B)


@register_advantage("dr_grpo")
def dr_grpo(rewards_B: Tensor, group_index_B: Tensor, *, eps: float = 1e-6) -> Tensor:
    """Dr. GRPO advantage: A_i = r_i − mean_G r (no std normalisation, which biases toward easy/hard groups).

    Liu et al. 2025, "Understanding R1-Zero-Like Training: A Critical Perspective". The paper's other half,
    the constant length normaliser, is the loss aggregation `seq-mean-token-sum-norm` in `agentrl.train.losses`.
    `eps` is unused (kept for the shared signature).
    """
    rewards_B = _as_float(rewards_B)
    _, _, mean_B, _ = _group_stats(rewards_B, group_index_B)
    return _zero_constant_groups(rewards_B - mean_B, rewards_B, group_index_B)


@register_advantage("rloo")
def rloo(rewards_B: Tensor, group_index_B: Tensor, *, eps: float = 1e-6) -> Tensor:
    """REINFORCE leave-one-out: A_i = r_i − mean_{j≠i} r_j = (G·r_i − Σ_j r_j) / (G − 1).

    Ahmadian et al. 2024, "Back to Basics: Revisiting REINFORCE Style Optimization for Learning from Human
    Feedback in LLMs". The baseline excludes the sample itself, so it is unbiased even for small G.
    A single-member group has no baseline and gets 0. `eps` is unused (kept for the shared signature).
    """
    rewards_B = _as_float(rewards_B)
    count_B, sum_B, _, _ = _group_stats(rewards_B, group_index_B)
    advantages_B = (count_B * rewards_B - sum_B) / (count_B - 1).clamp(min=1)
    advantages_B = torch.where(count_B > 1, advantages_B, 0.0)
    return _zero_constant_groups(advantages_B, rewards_B, group_index_B)


@register_advantage("lite_ppo")
def lite_ppo(rewards_B: Tensor, group_index_B: Tensor, *, eps: float = 1e-6) -> Tensor:
    """Lite PPO advantage: A_i = (r_i − mean_G r) / (std_batch r + eps) — group mean, *batch* std.

    Liu et al. 2025, "Tricks or Traps? A Deep Dive into RL for LLM Reasoning". The batch std (population
    std over all rewards in the batch) is more stable than the group std when rewards are sparse or large.
    Changing another group's rewards therefore rescales, but never shifts or reorders, this group's values.
    """
    rewards_B = _as_float(rewards_B)
    _, _, mean_B, _ = _group_stats(rewards_B, group_index_B)
    batch_std = rewards_B.std(correction=0) if rewards_B.numel() else rewards_B.new_zeros(())
    return _zero_constant_groups((rewards_B - mean_B) / (batch_std + eps), rewards_B, group_index_B)


@register_advantage("reinforce_pp")
def reinforce_pp(rewards_B: Tensor, group_index_B: Tensor, *, eps: float = 1e-6) -> Tensor:
    """REINFORCE++ with baseline: A_i = r_i − mean_G r, then normalised over the whole batch,
    Â_i = (A_i − mean_batch A) / (std_batch A + eps).

    Hu et al. 2025, "REINFORCE++: A Simple and Efficient Approach for Aligning Large Language Models" (arXiv
    2501.03262; later versions "...with Robustness to Both Prompt and Reward Models"), the `baseline` variant for
    several samples per prompt: the group mean removes the prompt's difficulty, the global normalisation sets one
    scale for the batch (unlike GRPO's per-group std, which inflates near-constant groups; unlike Lite PPO, the
    std is that of the centred values, not of the raw rewards). E.g. groups [1, 0, 0] and [3, 1]: centred
    [2/3, −1/3, −1/3, 1, −1], batch std √(8/15) → [0.913, −0.456, −0.456, 1.369, −1.369].
    Deviations: the statistics weigh every trajectory once (the paper normalises the per-token advantages over
    all response tokens of the batch, so long responses weigh more); std is the population std; the paper's
    per-token KL penalty in the reward is not part of the estimator (`trainer.kl_in_reward` subtracts it in the
    learner, after credit assignment); constant groups get exactly 0.
    """
    rewards_B = _as_float(rewards_B)
    _, _, mean_B, _ = _group_stats(rewards_B, group_index_B)
    centred_B = rewards_B - mean_B
    if not centred_B.numel():
        return centred_B
    normalised_B = (centred_B - centred_B.mean()) / (centred_B.std(correction=0) + eps)
    return _zero_constant_groups(normalised_B, rewards_B, group_index_B)


@register_advantage("ngrpo")
def ngrpo(rewards_B: Tensor, group_index_B: Tensor, *, eps: float = 1e-6, r_max: float = 1.0) -> Tensor:
    """NGRPO: group statistics over R ∪ {r_max}, a virtual maximum-reward sample: A_i = (r_i − μ') / (σ' + eps).

    Nan et al. 2025, "NGRPO: Negative-enhanced Group Relative Policy Optimization" (algorithms.md §2.2):
    μ' = (Σ_i r_i + r_max) / (G + 1), σ' the population std of the G + 1 values. An all-wrong group therefore
    gets identical negative advantages instead of zeros, so failures still push probability away.
    `r_max` is the best reward the run's rewards can give (`trainer.ngrpo_r_max`, default 1.0): with rewards in
    [−1, 2], say, set it to 2, or a group that scored 2 throughout would be graded *above* the virtual sample.
    Deviations: this breaks the module convention on purpose — only a group that equals r_max throughout is
    constant, and gets exactly 0; the paper's asymmetric clipping is not part of the estimator (set
    `trainer.clip_low` / `clip_high`).
    """
    rewards_B = _as_float(rewards_B)
    count_B, sum_B, _, _ = _group_stats(rewards_B, group_index_B)
    mean_B = (sum_B + r_max) / (count_B + 1)
    num_groups = int(group_index_B.max()) + 1 if group_index_B.numel() else 0
    square_B = _group_sum((rewards_B - mean_B).square(), group_index_B, num_groups)[group_index_B]
    std_B = ((square_B + (r_max - mean_B) ** 2) / (count_B + 1)).sqrt()
    advantages_B = (rewards_B - mean_B) / (std_B + eps)
    return torch.where(std_B == 0, 0.0, advantages_B)


@register_advantage("mc_grpo")
def mc_grpo(rewards_B: Tensor, group_index_B: Tensor, *, eps: float = 1e-6) -> Tensor:
    """MC-GRPO: the group *median* as the baseline, A_i = (r_i − median_G r) / (std_G r + eps).

    "MC-GRPO" (algorithms.md §2.2, from the abstract): sample G + 1 rollouts, use their median as the baseline;
    the median rollout (the pivot, `median_pivots`) has A = 0 and is left out of the loss, so exactly G samples
    contribute. The median is robust to one outlier and avoids the sign flips of mean baselines at small G.
    Deviations (the abstract gives only the baseline): the scale is GRPO's population std over all G + 1
    rollouts; an even-sized group uses the mean of its two middle values and has no pivot. Constant groups → 0.
    """
    rewards_B = _as_float(rewards_B)
    _, _, _, std_B = _group_stats(rewards_B, group_index_B)
    low_B, high_B, _ = _median_ranks(rewards_B, group_index_B)
    advantages_B = (rewards_B - (rewards_B[low_B] + rewards_B[high_B]) / 2) / (std_B + eps)
    return _zero_constant_groups(advantages_B, rewards_B, group_index_B)


def median_pivots(rewards_B: Tensor, group_index_B: Tensor) -> Tensor:
    """MC-GRPO's pivot of each odd-sized group as a bool mask `pivot_B` (the middle rollout by reward; ties by
    batch order): exactly one per odd group, none in even groups."""
    _, _, pivot_B = _median_ranks(_as_float(rewards_B), group_index_B)
    return pivot_B


def _median_ranks(rewards_B: Tensor, group_index_B: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Per trajectory, the batch index of its group's lower and upper middle rollout, and the pivot mask."""
    if not rewards_B.numel():
        empty = group_index_B.new_zeros(0)
        return empty, empty, torch.zeros(0, dtype=torch.bool)
    # sort by reward, then stably by group: each group's members end up contiguous and in reward order
    order_N = torch.sort(rewards_B, stable=True).indices
    order_N = order_N[torch.sort(group_index_B[order_N], stable=True).indices]
    count_K = torch.bincount(group_index_B)
    start_K = torch.cumsum(count_K, 0) - count_K
    low_K = order_N[(start_K + (count_K - 1).clamp(min=0) // 2).clamp(max=len(order_N) - 1)]
    high_K = order_N[(start_K + count_K // 2).clamp(max=len(order_N) - 1)]
    pivot_B = torch.zeros_like(rewards_B, dtype=torch.bool)
    odd_K = count_K % 2 == 1
    pivot_B[low_K[odd_K]] = True
    return low_K[group_index_B], high_K[group_index_B], pivot_B
