"""Branch-aware attribution: credit for the turns a forked trajectory shares with its parent.

A branch (ARPO/AEPO forks, `Trajectory.parent_id` / `branch_turn`) repeats its parent's turns 0..branch_turn−1
token for token, so those turns appear in the batch once per trajectory that contains them. Dong et al. 2025,
"Agentic Reinforced Policy Optimization" (ARPO, arXiv 2507.19849) names two attributions:

- `soft` (what the ARPO code ships; the default): every copy keeps its own trajectory's advantage, and since the
  copies have identical tokens and ratios their gradients add up to the sum of the branches' advantages.
- `hard`: every copy of a shared turn gets the mean advantage of all trajectories that contain it (each
  branch-specific turn keeps its own), i.e. the shared prefix is credited with the average over its
  descendants; algorithms.md §5.3 notes this equals SALT's averaging over exact shared prefixes.

Deviation: the copies are kept (not merged into one sample), so under `hard` a prefix shared by n trajectories
still weighs n times in the token-mean; its advantage, not its weight, is what changes. A parent missing from
the batch (an infrastructure failure, say) makes its branch a root.
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
    (the earliest ancestor owning the turn, k).
    """
    by_id = {t.trajectory_id: t for t in trajectories}
    index: dict[tuple[str, int], int] = {}
    out = []
    for trajectory in trajectories:
        ids = []
        for k in range(len(trajectory.turns)):
            owner = trajectory
            while (
                owner.parent_id in by_id
                and owner.branch_turn is not None
                and k < owner.branch_turn
                and owner.parent_id != owner.trajectory_id
            ):
                owner = by_id[owner.parent_id]  # type: ignore[index]
            ids.append(index.setdefault((owner.trajectory_id, k), len(index)))
        out.append(ids)
    return out


def hard_attribution(advantages_N: Tensor, shared_id_N: Tensor) -> Tensor:
    """Replace every turn's advantage by the mean over all copies of that turn (same `shared_id_N`)."""
    if advantages_N.numel() == 0:
        return advantages_N.clone()
    size = int(shared_id_N.max()) + 1
    sum_U = advantages_N.new_zeros(size).index_add_(0, shared_id_N, advantages_N)
    count_U = advantages_N.new_zeros(size).index_add_(0, shared_id_N, torch.ones_like(advantages_N))
    return (sum_U / count_U.clamp(min=1))[shared_id_N]


def attribute_branches(
    trajectories: Sequence[Trajectory], advantages_B_K: Tensor, turn_mask_B_K: Tensor, mode: str
) -> tuple[Tensor, dict[str, float]]:
    """Apply `mode` to per-turn advantages; returns them and branch metrics."""
    if mode not in ATTRIBUTION_MODES:
        raise ConfigError(f"unknown branch attribution {mode!r}; known: {', '.join(ATTRIBUTION_MODES)}")
    ids = shared_turn_ids(trajectories)
    flat = [i for row in ids for i in row]
    copies = torch.bincount(torch.tensor(flat, dtype=torch.long)) if flat else torch.zeros(0, dtype=torch.long)
    metrics = {
        "credit/branches": float(sum(t.parent_id is not None for t in trajectories)),
        "credit/shared_turn_fraction": float((copies[torch.tensor(flat, dtype=torch.long)] > 1).float().mean())
        if flat
        else 0.0,
    }
    if mode == "soft" or not flat:
        return advantages_B_K, metrics
    out_B_K = advantages_B_K.clone()
    out_B_K[turn_mask_B_K] = hard_attribution(advantages_B_K[turn_mask_B_K], torch.tensor(flat, dtype=torch.long))
    return out_B_K, metrics
