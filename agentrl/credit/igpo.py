"""IGPO turn-level credit: per-turn rewards → group-normalised, discounted per-turn advantages.

Wang et al. 2025, "Information Gain-based Policy Optimization" (IGPO, arXiv 2510.14967); the normalisation and
accumulation follow the newer official code (`compute_grpo_outcome_advantage`, algorithms.md §3.3):

    r_{i,t} = IG_t for t < T_i (the turn reward, e.g. `agentrl.rewards.info_gain`),  r_{i,T} = outcome
    r̃ = (r − μ) / (σ + 1e−6)     μ, σ (population; σ = 1 when the pool has ≤ 1 value) over the group's pool
    Â_{i,k} = r̃_{i,k} + γ · Â_{i,k+1}                     (backwards over the trajectory's turns, γ = 1 default)

Pools (`norm`): `joint` — every turn reward and outcome of the group; `separate` — outcomes and turn rewards
each with their own μ, σ; `per_turn_index` — turn rewards per (group, turn index) and outcomes per group
(the A2TGPO refinement, arXiv 2605.06200, which keeps turn-1 and turn-9 gains apart).

Deviations from the official code: turn boundaries come from the trajectory's turns, not from nonzero reward
positions, so a turn reward of exactly 0 is pooled as a value instead of silently merging two turns; an absent
turn reward (None) is left out of the pool and contributes r̃ = 0. The final turn always carries the outcome
(any turn reward on it is ignored, as IGPO writes the outcome there). A group whose pool is constant gets
exactly 0. When no trajectory of the batch has a turn reward, this degrades to outcome-only turn credit
(each turn k gets γ^{T−1−k}·z(outcome)), reported by the `credit/igpo_outcome_only` metric.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from agentrl.credit.scored_turns import ScoredTurns
from agentrl.errors import ConfigError

NORM_MODES = ("joint", "separate", "per_turn_index")


def igpo_advantages(
    turn_rewards_B_K: Tensor,
    turn_reward_mask_B_K: Tensor,
    outcome_B: Tensor,
    turn_mask_B_K: Tensor,
    group_index_B: Tensor,
    *,
    gamma: float = 1.0,
    norm: str = "joint",
    eps: float = 1e-6,
) -> Tensor:
    """IGPO per-turn advantages `advantages_B_K` (0 on turns that do not exist); see the module docstring."""
    if norm not in NORM_MODES:
        raise ConfigError(f"unknown IGPO normalisation {norm!r}; known: {', '.join(NORM_MODES)}")
    num_B, width = turn_mask_B_K.shape
    if num_B == 0 or width == 0:
        return torch.zeros(num_B, width)
    last_B = turn_mask_B_K.sum(-1) - 1
    k_K = torch.arange(width)
    last_B_K = (k_K[None, :] == last_B[:, None]) & turn_mask_B_K
    rewards_B_K = torch.where(last_B_K, outcome_B[:, None].float(), turn_rewards_B_K.float())
    present_B_K = last_B_K | (turn_reward_mask_B_K & turn_mask_B_K)
    bucket_B_K = _buckets(group_index_B, last_B_K, k_K, width, norm)
    normalised_B_K = torch.where(present_B_K, _bucket_zscore(rewards_B_K, present_B_K, bucket_B_K, eps), 0.0)
    return discounted_suffix_sum(normalised_B_K, turn_mask_B_K, gamma)


def discounted_suffix_sum(values_B_K: Tensor, turn_mask_B_K: Tensor, gamma: float) -> Tensor:
    """A_k = v_k + γ·A_{k+1} within each row's existing turns; padding turns stay 0."""
    out_B_K = torch.zeros_like(values_B_K)
    running_B = values_B_K.new_zeros(values_B_K.shape[0])
    for k in range(values_B_K.shape[1] - 1, -1, -1):
        running_B = torch.where(turn_mask_B_K[:, k], values_B_K[:, k] + gamma * running_B, 0.0)
        out_B_K[:, k] = running_B
    return out_B_K


def _buckets(group_index_B: Tensor, last_B_K: Tensor, k_K: Tensor, width: int, norm: str) -> Tensor:
    """The pool each (trajectory, turn) is normalised in, as one integer id."""
    group_B_K = group_index_B[:, None].expand_as(last_B_K)
    if norm == "joint":
        return group_B_K
    if norm == "separate":
        return group_B_K * 2 + last_B_K.long()
    # per_turn_index: turn rewards by turn index, outcomes in a pool of their own (slot `width`)
    slot_B_K = torch.where(last_B_K, width, k_K[None, :].expand_as(last_B_K))
    return group_B_K * (width + 1) + slot_B_K


def _bucket_zscore(values_B_K: Tensor, present_B_K: Tensor, bucket_B_K: Tensor, eps: float) -> Tensor:
    """(v − μ_bucket) / (σ_bucket + eps) over present entries; σ := 1 for pools of ≤ 1 value, constant → 0."""
    ids_N, values_N = bucket_B_K[present_B_K], values_B_K[present_B_K]
    size = int(bucket_B_K.max()) + 1
    count_U = values_N.new_zeros(size).index_add_(0, ids_N, torch.ones_like(values_N))
    mean_U = values_N.new_zeros(size).index_add_(0, ids_N, values_N) / count_U.clamp(min=1)
    var_U = values_N.new_zeros(size).index_add_(0, ids_N, (values_N - mean_U[ids_N]).square()) / count_U.clamp(min=1)
    std_U = torch.where(count_U <= 1, 1.0, var_U.sqrt())
    max_U = values_N.new_full((size,), -torch.inf).scatter_reduce(0, ids_N, values_N, "amax")
    min_U = values_N.new_full((size,), torch.inf).scatter_reduce(0, ids_N, values_N, "amin")
    constant_U = (max_U == min_U) & (count_U > 1)
    z_B_K = (values_B_K - mean_U[bucket_B_K]) / (std_U[bucket_B_K] + eps)
    return torch.where(constant_U[bucket_B_K], 0.0, z_B_K)


def igpo_credit(batch: ScoredTurns, config: Any) -> tuple[Tensor, dict[str, float]]:
    """Credit assigner `igpo` (`trainer.credit = "igpo"`): IGPO advantages from a ScoredTurns."""
    has_turn_rewards = bool((batch.turn_reward_mask_B_K & ~batch.last_turn_B_K).any())
    advantages_B_K = igpo_advantages(
        batch.turn_rewards_B_K,
        batch.turn_reward_mask_B_K,
        batch.outcome_B,
        batch.turn_mask_B_K,
        batch.group_index_B,
        gamma=config.igpo_gamma,
        norm=config.igpo_norm,
    )
    rewarded = batch.turn_reward_mask_B_K & batch.turn_mask_B_K & ~batch.last_turn_B_K
    metrics = {
        "credit/igpo_outcome_only": float(not has_turn_rewards),
        "credit/igpo_turn_reward_fraction": float(rewarded.sum())
        / max(int((batch.turn_mask_B_K & ~batch.last_turn_B_K).sum()), 1),
    }
    if has_turn_rewards:
        metrics["credit/igpo_turn_reward_mean"] = float(batch.turn_rewards_B_K[rewarded].mean())
    return advantages_B_K, metrics
