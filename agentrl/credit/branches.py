"""Branch-aware attribution: credit for the turns a forked trajectory shares with its parent.

A branch (ARPO/AEPO forks, `Trajectory.parent_id` / `branch_turn`) repeats its parent's turns 0..branch_turn−1
token for token, so those turns appear in the batch once per trajectory that contains them. Dong et al. 2025,
"Agentic Reinforced Policy Optimization" (ARPO, arXiv 2507.19849) names two attributions:

- `soft` (what the ARPO code ships; the default): every copy keeps its own trajectory's advantage and stays in
  the loss. The copies have identical tokens and ratios, so a turn shared by n trajectories gets the gradient
  Σ_i A_i·∇log π, and weighs n times in a token-mean.
- `hard`: a shared turn is one segment of the rollout tree, trained once with the mean advantage of the
  trajectories that contain it, (1/n)·Σ_i A_i; each branch-specific turn keeps its own advantage.
  Algorithms.md §5.3 notes this equals SALT's averaging over exact shared prefixes.

How `hard` is realised: the copy in the trajectory that sampled the turn (the earliest ancestor holding it; the
first copy in batch order if that one is not trained) carries the mean, and every other copy is taken out of the
loss (`trained_B_K` False: its tokens leave the loss mask, so they add neither gradient nor tokens to any
aggregation's denominator). The mean runs over the copies that train (an MC-GRPO pivot does not). So the shared
tokens contribute mean(A)·∇log π once under every aggregation, where `soft` gives n copies summing to
Σ_i A_i·∇log π: under token-mean hard = soft / n on the shared tokens, with the shared tokens counted once in
the denominator. Keeping all copies with the mean advantage instead would change nothing under token-mean (n
copies of the mean sum to Σ_i A_i), which is why the copies are masked rather than re-weighted.

A parent missing from the batch (an infrastructure failure, say) makes its branch a root.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from agentrl.errors import ConfigError
from agentrl.types import Trajectory

ATTRIBUTION_MODES = ("soft", "hard")


def shared_turn_ids(trajectories: Sequence[Trajectory]) -> list[list[int]]:
    """For each trajectory and turn, an id equal across every trajectory that contains that very turn.

    Turn k of a branch with k < branch_turn is its parent's turn k (recursively), so ids are assigned to
    (the earliest ancestor owning the turn, k), numbered in order of first appearance.
    """
    return [[turn_id for turn_id, _ in row] for row in _turn_owners(trajectories)]


def _turn_owners(trajectories: Sequence[Trajectory]) -> list[list[tuple[int, bool]]]:
    """Per trajectory and turn: (shared id, whether this trajectory is the one that sampled the turn)."""
    by_id = {t.trajectory_id: t for t in trajectories}
    index: dict[tuple[str, int], int] = {}
    out = []
    for trajectory in trajectories:
        row = []
        for k in range(len(trajectory.turns)):
            owner = trajectory
            while (
                owner.parent_id in by_id
                and owner.branch_turn is not None
                and k < owner.branch_turn
                and owner.parent_id != owner.trajectory_id
            ):
                owner = by_id[owner.parent_id]  # type: ignore[index]
            row.append((index.setdefault((owner.trajectory_id, k), len(index)), owner is trajectory))
        out.append(row)
    return out


def hard_attribution(
    advantages_N: Tensor, shared_id_N: Tensor, kept_N: Tensor, sampled_N: Tensor
) -> tuple[Tensor, Tensor]:
    """Hard attribution over N turn copies: the mean advantage of the kept copies of each shared turn (on every
    copy), and `trains_N`, the one kept copy per shared turn that stays in the loss: the copy in the trajectory
    that sampled the turn (`sampled_N`) when it is kept, else the first kept copy in order."""
    if advantages_N.numel() == 0:
        return advantages_N.clone(), kept_N.clone()
    size = int(shared_id_N.max()) + 1
    weight_N = kept_N.to(advantages_N.dtype)
    sum_U = advantages_N.new_zeros(size).index_add_(0, shared_id_N, advantages_N * weight_N)
    count_U = advantages_N.new_zeros(size).index_add_(0, shared_id_N, weight_N)
    # the carrier of each shared turn is the kept copy with the smallest key: the sampling copy first (−1), then
    # batch order; copies that do not train can never be chosen
    position_N = torch.arange(len(shared_id_N))
    never = len(shared_id_N)
    key_N = torch.where(kept_N, torch.where(sampled_N, -1, position_N), never)
    first_U = torch.full((size,), never, dtype=torch.long).scatter_reduce(0, shared_id_N, key_N, "amin")
    trains_N = kept_N & (key_N == first_U[shared_id_N])
    return (sum_U / count_U.clamp(min=1))[shared_id_N], trains_N


def attribute_branches(
    trajectories: Sequence[Trajectory],
    advantages_B_K: Tensor,
    turn_mask_B_K: Tensor,
    mode: str,
    keep_B: Tensor | None = None,
) -> tuple[Tensor, Tensor, dict[str, float]]:
    """Apply `mode` to per-turn advantages; returns them, `trained_B_K` (the turn copies that stay in the loss)
    and branch metrics. `keep_B` marks the trajectories that train at all (default: every one)."""
    if mode not in ATTRIBUTION_MODES:
        raise ConfigError(f"unknown branch attribution {mode!r}; known: {', '.join(ATTRIBUTION_MODES)}")
    keep_B = torch.ones(len(trajectories), dtype=torch.bool) if keep_B is None else keep_B
    owners = _turn_owners(trajectories)
    flat = torch.tensor([i for row in owners for i, _ in row], dtype=torch.long)
    copies_U = torch.bincount(flat) if len(flat) else torch.zeros(0, dtype=torch.long)
    metrics = {
        "credit/branches": float(sum(t.parent_id is not None for t in trajectories)),
        "credit/shared_turn_fraction": float((copies_U[flat] > 1).float().mean()) if len(flat) else 0.0,
    }
    trained_B_K = turn_mask_B_K & keep_B[:, None]
    if mode == "soft" or not len(flat):
        return advantages_B_K, trained_B_K, metrics
    sampled_N = torch.tensor([own for row in owners for _, own in row], dtype=torch.bool)
    kept_N = trained_B_K[turn_mask_B_K]
    mean_N, trains_N = hard_attribution(advantages_B_K[turn_mask_B_K], flat, kept_N, sampled_N)
    out_B_K = advantages_B_K.clone()
    out_B_K[turn_mask_B_K] = mean_N
    trained_B_K = torch.zeros_like(turn_mask_B_K)
    trained_B_K[turn_mask_B_K] = trains_N
    metrics["credit/deduplicated_turns"] = float((kept_N & ~trains_N).sum())
    return out_B_K, trained_B_K, metrics
