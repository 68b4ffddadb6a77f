"""ScoredTurns: the scorable trajectories of a step laid out as padded per-turn tensors.

Credit assigners read rewards from here and return one advantage per turn (`advantages_B_K`, B trajectories,
K = the most turns any of them has); `token_advantages` then spreads a turn's advantage over exactly the tokens
that turn's policy call sampled, using the token layout of `agentrl.types.Trajectory` (prompt, then per turn its
completion ids followed by its observation ids). Prompt and observation tokens get 0: they are outside the loss
mask.

Infrastructure failures and unscored trajectories (reward None) are never members, so no group statistic
computed over a ScoredTurns can see them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from agentrl.types import Trajectory, TrajectoryGroup


@dataclass(frozen=True)
class ScoredTurns:
    """Member trajectories with their group index, outcome reward and turn rewards (padded to K turns)."""

    trajectories: tuple[Trajectory, ...]
    group_index_B: Tensor
    """Group (task) of each trajectory, 0..num_groups-1, as in `agentrl.credit.advantages`."""
    outcome_B: Tensor
    """`Trajectory.reward`: the outcome reward."""
    turn_rewards_B_K: Tensor
    """`Turn.reward` (the sum of the turn-level rewards); 0 where absent."""
    turn_reward_mask_B_K: Tensor
    """True where a turn carries a turn reward (not None)."""
    turn_mask_B_K: Tensor
    """True for turns that exist (k < number of turns)."""
    num_groups: int

    @classmethod
    def from_groups(cls, groups: Sequence[TrajectoryGroup]) -> ScoredTurns:
        members: list[Trajectory] = []
        group_index: list[int] = []
        for g, group in enumerate(groups):
            for t in group.valid:
                if t.reward is not None and t.turns:
                    members.append(t)
                    group_index.append(g)
        width = max((len(t.turns) for t in members), default=0)
        rewards = [[0.0] * width for _ in members]
        present = [[False] * width for _ in members]
        exists = [[False] * width for _ in members]
        for b, t in enumerate(members):
            for k, turn in enumerate(t.turns):
                exists[b][k] = True
                if turn.reward is not None:
                    rewards[b][k], present[b][k] = float(turn.reward), True
        return cls(
            trajectories=tuple(members),
            group_index_B=torch.tensor(group_index, dtype=torch.long),
            outcome_B=torch.tensor([float(t.reward) for t in members], dtype=torch.float32),  # type: ignore[arg-type]
            turn_rewards_B_K=torch.tensor(rewards, dtype=torch.float32).reshape(len(members), width),
            turn_reward_mask_B_K=torch.tensor(present, dtype=torch.bool).reshape(len(members), width),
            turn_mask_B_K=torch.tensor(exists, dtype=torch.bool).reshape(len(members), width),
            num_groups=len(groups),
        )

    @property
    def num_turns_B(self) -> Tensor:
        return self.turn_mask_B_K.sum(-1)

    @property
    def last_turn_B_K(self) -> Tensor:
        """True at each trajectory's final turn (where the outcome reward lands)."""
        last_B = (self.num_turns_B - 1).clamp(min=0)
        k_K = torch.arange(self.turn_mask_B_K.shape[-1])
        return (k_K[None, :] == last_B[:, None]) & self.turn_mask_B_K

    def __len__(self) -> int:
        return len(self.trajectories)


def token_advantages(trajectory: Trajectory, advantages_K: Sequence[float]) -> tuple[float, ...]:
    """Per-token advantages aligned with `trajectory.token_ids`: turn k's value on its sampled tokens, else 0."""
    out = [0.0] * len(trajectory.prompt_ids)
    for turn, advantage in zip(trajectory.turns, advantages_K, strict=True):
        out += [float(advantage)] * len(turn.completion_ids)
        out += [0.0] * len(turn.observation_ids)
    return tuple(out)


def token_entropies(trajectory: Trajectory) -> tuple[float, ...]:
    """Sampler entropies aligned with `trajectory.token_ids` (0 on prompt and observation tokens)."""
    out = [0.0] * len(trajectory.prompt_ids)
    for turn in trajectory.turns:
        entropies = list(turn.entropies)[: len(turn.completion_ids)]
        out += entropies + [0.0] * (len(turn.completion_ids) - len(entropies))
        out += [0.0] * len(turn.observation_ids)
    return tuple(out)
