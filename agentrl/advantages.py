"""Group-relative advantage estimators: outcome rewards of a group → one advantage per trajectory.

Every estimator has the same signature and is a pure tensor function:

    fn(rewards_B, group_index_B, *, eps=1e-6) -> advantages_B

`rewards_B` holds one scalar reward per trajectory of the batch and `group_index_B` the group (task) each
trajectory belongs to, as integers 0..K-1 in any order (groups may be interleaved). Group statistics are
computed with `index_add_`, so there is no Python loop over groups. Estimators are registered by name in
`ADVANTAGE_ESTIMATORS` (`trainer.advantage = "grpo"`); `agentrl.registry.resolve("advantage", name)` also
accepts an import path to a user function with the same signature.

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
    the constant length normaliser, is the loss aggregation `seq-mean-token-sum-norm` in `agentrl.losses`.
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
