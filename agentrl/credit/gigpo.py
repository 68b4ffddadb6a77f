"""Anchor-state step groups: GiGPO and HGPO step-level advantages.

GiGPO — Feng et al. 2025, "Group-in-Group Policy Optimization for LLM Agent Training" (arXiv 2505.10978; read in
the authors' `gigpo/core_gigpo.py`, algorithms.md §3.4). Within a group, turns whose current observation is
identical (or, with fuzzy matching, similar) form a step group; each turn's discounted return is compared with
the other members of its step group, and the result is added to the episode advantage:

    A^E_i     = R_i − mean_G R                       (`mean_norm`, default; `mean_std_norm` divides by std_G)
    R_{i,t}   = Σ_{k≥t} γ^{k−t} r_{i,k}               (r = turn reward, plus the outcome on the last turn)
    A^S_{i,t} = R_{i,t} − mean_{step group} R         (singleton step group → 0)
    A_{i,t}   = A^E_i + ω · A^S_{i,t}                 (ω = 1, γ = 0.95)

HGPO — "Hierarchy-of-Groups Policy Optimization" (arXiv 2602.22817; recipe/hgpo). Steps with the same observation
may have different histories; HGPO also groups them by the previous l observations, l = 0..K, and averages the
per-level step advantages with weights w_l = (l + 1)^α over the levels where the step has company:
A^S = Σ_l w_l a^{(l)} / Σ_l w_l.

A turn's observation is what the policy saw right before it: the prompt for turn 0, else the observation tokens
appended after the previous turn (tool results and the next generation prompt). Fuzzy matching compares those
token sequences with difflib's ratio (≥ `threshold`, GiGPO's option uses 0.95 on text), greedily against the
first member of each existing step group. Deviations: the HGPO reference averages over levels where a^{(l)} ≠ 0;
here a level counts when the step's subgroup has more than one member, so a step that equals its subgroup mean
pulls the average towards 0 instead of being skipped. History levels use step-group ids (so fuzzy matching
applies to history too) rather than raw observations.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from agentrl.credit.advantages import dr_grpo, grpo
from agentrl.credit.igpo import discounted_suffix_sum
from agentrl.credit.scored_turns import ScoredTurns
from agentrl.types import Trajectory


def observation_keys(trajectory: Trajectory) -> list[tuple[int, ...]]:
    """The observation each turn acted on: the prompt ids, then the previous turn's observation ids."""
    keys = [tuple(trajectory.prompt_ids)]
    keys += [tuple(turn.observation_ids) for turn in trajectory.turns[:-1]]
    return keys


def step_clusters(keys_N: Sequence[Sequence[Any]], group_N: Sequence[int], threshold: float = 1.0) -> list[int]:
    """Step-group id of each step: same group and an identical key (`threshold` ≥ 1) or difflib ratio ≥ it."""
    ids: list[int] = []
    exact: dict[tuple[int, tuple[Any, ...]], int] = {}
    representatives: dict[int, list[tuple[int, Sequence[Any]]]] = {}
    for key, group in zip(keys_N, group_N, strict=True):
        key = tuple(key)
        found = exact.get((group, key))
        if found is None and threshold < 1.0:
            found = _fuzzy_match(key, representatives.get(group, []), threshold)
        if found is None:
            found = len(exact)
            representatives.setdefault(group, []).append((found, key))
        exact.setdefault((group, key), found)
        ids.append(found)
    return _dense(ids)


def _fuzzy_match(key: Sequence[Any], candidates: list[tuple[int, Sequence[Any]]], threshold: float) -> int | None:
    for cluster, other in candidates:
        matcher = difflib.SequenceMatcher(None, key, other, autojunk=False)
        # real_quick_ratio and quick_ratio are cheap upper bounds on ratio
        if matcher.real_quick_ratio() >= threshold and matcher.quick_ratio() >= threshold:
            if matcher.ratio() >= threshold:
                return cluster
    return None


def history_clusters(cluster_N: Sequence[int], trajectory_N: Sequence[int], levels: int) -> list[list[int]]:
    """For l = 0..levels: subgroup ids of steps sharing their step group and the previous l step groups.

    Steps must be listed in turn order within each trajectory; missing history (before turn 0) is its own value.
    """
    history: dict[int, list[int]] = {}
    keys: list[list[tuple[int, ...]]] = [[] for _ in range(levels + 1)]
    for cluster, trajectory in zip(cluster_N, trajectory_N, strict=True):
        past = history.setdefault(trajectory, [])
        for level in range(levels + 1):
            previous = past[::-1][:level]
            keys[level].append((cluster, *previous, *[-1] * (level - len(previous))))
        past.append(cluster)
    return [_dense(level_keys) for level_keys in keys]


def _dense(keys: Sequence[Any]) -> list[int]:
    index: dict[Any, int] = {}
    return [index.setdefault(key, len(index)) for key in keys]


def anchor_step_advantages(
    returns_N: Tensor, cluster_N: Tensor, *, std_norm: bool = False, eps: float = 1e-6
) -> Tensor:
    """GiGPO step advantage A^S_N = (R − mean_cluster R) [/ (std_cluster R + eps)]; singleton or constant → 0."""
    if returns_N.numel() == 0:
        return returns_N.clone()
    advantage = grpo if std_norm else dr_grpo
    return advantage(returns_N.float(), cluster_N, eps=eps)


def hgpo_step_advantages(
    returns_N: Tensor, level_clusters_L_N: Tensor, *, alpha: float = 1.0, std_norm: bool = False, eps: float = 1e-6
) -> Tensor:
    """HGPO step advantage: Σ_l w_l a^{(l)} / Σ_l w_l over levels whose subgroup has > 1 member, w_l = (l+1)^α."""
    total_N = returns_N.new_zeros(returns_N.shape, dtype=torch.float32)
    weight_N = torch.zeros_like(total_N)
    for level, cluster_N in enumerate(level_clusters_L_N):
        size_U = torch.bincount(cluster_N)
        member_N = size_U[cluster_N] > 1
        w = float(level + 1) ** alpha
        advantage_N = anchor_step_advantages(returns_N, cluster_N, std_norm=std_norm, eps=eps)
        total_N += torch.where(member_N, w * advantage_N, 0.0)
        weight_N += torch.where(member_N, w, 0.0)
    return torch.where(weight_N > 0, total_N / weight_N.clamp(min=1e-12), 0.0)


def step_returns(batch: ScoredTurns, gamma: float) -> Tensor:
    """R_{i,t} per turn (`returns_B_K`): discounted sum of turn rewards, with the outcome added on the last turn."""
    rewards_B_K = torch.where(batch.turn_reward_mask_B_K, batch.turn_rewards_B_K, 0.0)
    rewards_B_K = rewards_B_K + torch.where(batch.last_turn_B_K, batch.outcome_B[:, None], 0.0)
    return discounted_suffix_sum(rewards_B_K, batch.turn_mask_B_K, gamma)


def _steps(batch: ScoredTurns, threshold: float) -> tuple[list[int], list[int]]:
    keys, groups, owners = [], [], []
    for b, (trajectory, group) in enumerate(zip(batch.trajectories, batch.group_index_B.tolist(), strict=True)):
        for key in observation_keys(trajectory):
            keys.append(key)
            groups.append(group)
            owners.append(b)
    return step_clusters(keys, groups, threshold), owners


def _combine(batch: ScoredTurns, step_N: Tensor, config: Any, clusters: list[int]) -> tuple[Tensor, dict[str, float]]:
    episode = grpo if config.step_std_norm else dr_grpo
    episode_B = episode(batch.outcome_B, batch.group_index_B)
    step_B_K = torch.zeros_like(batch.turn_rewards_B_K)
    step_B_K[batch.turn_mask_B_K] = step_N
    advantages_B_K = episode_B[:, None] + config.step_advantage_weight * step_B_K
    sizes = torch.bincount(torch.tensor(clusters, dtype=torch.long))
    metrics = {
        "credit/step_groups": float(len(sizes)),
        "credit/steps_in_shared_groups": float((sizes[sizes > 1]).sum()) / max(len(clusters), 1),
        "credit/step_advantage_abs_mean": float(step_N.abs().mean()) if step_N.numel() else 0.0,
    }
    return torch.where(batch.turn_mask_B_K, advantages_B_K, 0.0), metrics


def gigpo_credit(batch: ScoredTurns, config: Any) -> tuple[Tensor, dict[str, float]]:
    """Credit assigner `gigpo`: episode advantage + ω · anchor-state step advantage."""
    clusters, _ = _steps(batch, config.anchor_match_threshold)
    returns_N = step_returns(batch, config.step_gamma)[batch.turn_mask_B_K]
    step_N = anchor_step_advantages(returns_N, torch.tensor(clusters, dtype=torch.long), std_norm=config.step_std_norm)
    return _combine(batch, step_N, config, clusters)


def hgpo_credit(batch: ScoredTurns, config: Any) -> tuple[Tensor, dict[str, float]]:
    """Credit assigner `hgpo`: episode advantage + ω · history-hierarchical step advantage."""
    clusters, owners = _steps(batch, config.anchor_match_threshold)
    levels = history_clusters(clusters, owners, config.hgpo_history_turns)
    returns_N = step_returns(batch, config.step_gamma)[batch.turn_mask_B_K]
    step_N = hgpo_step_advantages(
        returns_N, torch.tensor(levels, dtype=torch.long), alpha=config.hgpo_alpha, std_norm=config.step_std_norm
    )
    return _combine(batch, step_N, config, clusters)
