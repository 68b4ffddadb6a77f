"""Credit assignment: scored trajectory groups → per-token advantages for the learner.

The group estimator (GRPO by default, see `agentrl/advantages.py`) turns each group's outcome rewards into one
advantage per trajectory; every token the policy sampled in that trajectory receives it, and prompt and
tool-output tokens receive nothing (they are outside the loss mask). Infrastructure failures are left out of
the group statistics entirely, so a crashed sandbox cannot drag a group's baseline down.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from agentrl.learner import TrainSample
from agentrl.registry import resolve
from agentrl.types import Trajectory, TrajectoryGroup


def trajectory_sample(trajectory: Trajectory, advantage: float) -> TrainSample:
    """Broadcast one advantage over the trajectory's sampled tokens."""
    mask = trajectory.loss_mask
    return TrainSample(
        token_ids=tuple(trajectory.token_ids),
        loss_mask=tuple(mask),
        advantages=tuple(advantage if m else 0.0 for m in mask),
        sampler_logprobs=tuple(trajectory.sampler_logprobs),
    )


def assign_credit(
    groups: Sequence[TrajectoryGroup], estimator: str = "grpo", *, skip_zero_advantage_groups: bool = True
) -> tuple[list[TrainSample], dict[str, float]]:
    """Advantages for every scorable trajectory; returns the samples and credit metrics."""
    members: list[Trajectory] = []
    group_index: list[int] = []
    for g, group in enumerate(groups):
        for t in group.valid:
            if t.reward is not None and t.turns:
                members.append(t)
                group_index.append(g)
    if not members:
        return [], {"credit/trajectories": 0.0}
    rewards_B = torch.tensor([t.reward for t in members], dtype=torch.float32)
    index_B = torch.tensor(group_index, dtype=torch.long)
    advantages_B = resolve("advantage", estimator)(rewards_B, index_B)
    informative = torch.zeros(len(groups), dtype=torch.bool)
    informative.index_put_((index_B,), advantages_B.abs() > 1e-8, accumulate=True)
    samples = [
        trajectory_sample(t, float(a))
        for t, a, g in zip(members, advantages_B.tolist(), group_index)
        if informative[g] or not skip_zero_advantage_groups
    ]
    metrics = {
        "credit/trajectories": float(len(samples)),
        "credit/informative_groups": float(informative.sum()),
        "credit/advantage_abs_mean": float(advantages_B.abs().mean()),
    }
    return samples, metrics
