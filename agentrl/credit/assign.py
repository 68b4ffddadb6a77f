"""Credit assignment: scored trajectory groups → per-token advantages for the learner.

    ScoredTurns.from_groups → credit assigner → per-turn advantages_B_K → branch attribution → per-token samples

A credit assigner (`trainer.credit`) maps a `ScoredTurns` to one advantage per turn:

- `trajectory` (default): a trajectory-level estimator of `agentrl/credit/advantages.py` (`trainer.advantage`: GRPO,
  Dr.GRPO, RLOO, Lite PPO, NGRPO, MC-GRPO, REINFORCE++) gives one advantage per trajectory, shared by all its turns;
- `igpo`: turn rewards + outcome, group-normalised and discounted (`agentrl/credit/igpo.py`);
- `gigpo` / `hgpo`: episode advantage plus an anchor-state step advantage (`agentrl/credit/gigpo.py`);
- any import path to a function `fn(batch: ScoredTurns, config: TrainerConfig) -> (advantages_B_K, metrics)`; it
  may return a third element, a bool `keep_B`, to leave trajectories out of the loss (MC-GRPO's pivot).

Forked trajectories then get branch-aware attribution of their shared turns (`agentrl/credit/branches.py`; under
`hard` the extra copies of a shared turn leave the loss mask), and each turn's advantage lands on exactly the
tokens its policy call sampled; prompt and tool-output tokens get nothing (they are outside the loss mask).
Infrastructure failures and unscored trajectories (every weighted reward abstained: `Trajectory.reward` is None)
are left out of every group statistic, so a crashed sandbox or an abstaining judge cannot move a group's
baseline.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from agentrl.credit.advantages import mc_grpo, median_pivots
from agentrl.credit.branches import attribute_branches
from agentrl.credit.scored_turns import ScoredTurns, token_advantages, token_entropies
from agentrl.registry import resolve
from agentrl.train.config import TrainerConfig
from agentrl.train.samples import TrainSample
from agentrl.types import Trajectory, TrajectoryGroup


def trajectory_sample(
    trajectory: Trajectory, advantage: float | Sequence[float], trained: Sequence[bool] | None = None
) -> TrainSample:
    """A TrainSample with one advantage for the whole trajectory, or one per turn; `trained` (one per turn) takes
    a turn's tokens out of the loss mask where it is False (a copy of a shared turn under hard attribution)."""
    per_turn = [advantage] * len(trajectory.turns) if isinstance(advantage, (int, float)) else advantage
    loss_mask = trajectory.loss_mask
    if trained is not None and not all(trained):
        turn_of = trajectory.turn_index  # −1 on the prompt, whose tokens are never in the loss anyway
        loss_mask = [m and turn_of[i] >= 0 and bool(trained[turn_of[i]]) for i, m in enumerate(loss_mask)]
    return TrainSample(
        token_ids=tuple(trajectory.token_ids),
        loss_mask=tuple(loss_mask),
        advantages=token_advantages(trajectory, per_turn),
        sampler_logprobs=tuple(trajectory.sampler_logprobs),
        sampler_entropies=token_entropies(trajectory),
        trajectory_id=trajectory.trajectory_id,
    )


def trajectory_credit(batch: ScoredTurns, config: Any) -> tuple[Tensor, dict[str, float], Tensor]:
    """Credit assigner `trajectory`: the `trainer.advantage` estimator's value on every turn.

    With `mc_grpo` the median pivot of each odd group is left out of the loss (`keep_B` False)."""
    estimator = resolve("advantage", config.advantage)
    advantages_B = estimator(batch.outcome_B, batch.group_index_B, **estimator_options(estimator, config))
    keep_B = torch.ones(len(batch), dtype=torch.bool)
    metrics: dict[str, float] = {}
    if estimator is mc_grpo:
        keep_B = ~median_pivots(batch.outcome_B, batch.group_index_B)
        metrics["credit/pivots_excluded"] = float((~keep_B).sum())
    return torch.where(batch.turn_mask_B_K, advantages_B[:, None], 0.0), metrics, keep_B


def estimator_options(estimator: Any, config: Any) -> dict[str, Any]:
    """The config values an estimator asks for by keyword: `r_max` ← `trainer.ngrpo_r_max`."""
    try:
        parameters = inspect.signature(estimator).parameters
    except (TypeError, ValueError):  # a callable without a readable signature takes the shared one only
        return {}
    return {"r_max": config.ngrpo_r_max} if "r_max" in parameters else {}


def assign_credit(
    groups: Sequence[TrajectoryGroup],
    estimator: str = "grpo",
    *,
    skip_zero_advantage_groups: bool = True,
    config: TrainerConfig | None = None,
) -> tuple[list[TrainSample], dict[str, float]]:
    """Per-token advantages for every scorable trajectory; returns the samples and credit metrics.

    `config` selects the credit assigner and its knobs; without one, trajectory-level `estimator` credit.
    """
    if config is None:
        config = TrainerConfig(advantage=estimator, skip_zero_advantage_groups=skip_zero_advantage_groups)
    batch = ScoredTurns.from_groups(groups)
    if not len(batch):
        return [], {"credit/trajectories": 0.0}
    advantages_B_K, metrics, *rest = resolve("credit", config.credit)(batch, config)
    keep_B = rest[0] if rest else torch.ones(len(batch), dtype=torch.bool)
    advantages_B_K, trained_B_K, branch_metrics = attribute_branches(
        batch.trajectories, advantages_B_K, batch.turn_mask_B_K, config.branch_attribution, keep_B
    )
    informative_K = informative_groups(advantages_B_K, batch.group_index_B, batch.num_groups)
    informative_B = informative_K[batch.group_index_B] | (not config.skip_zero_advantage_groups)
    samples = [
        trajectory_sample(t, row[: len(t.turns)], trained[: len(t.turns)])
        for t, row, trained, keep in zip(
            batch.trajectories,
            advantages_B_K.tolist(),
            trained_B_K.tolist(),
            (informative_B & keep_B).tolist(),
            strict=True,
        )
        if keep
    ]
    turn_values = advantages_B_K[batch.turn_mask_B_K]
    return samples, {
        "credit/trajectories": float(len(samples)),
        "credit/informative_groups": float(informative_K.sum()),
        "credit/advantage_abs_mean": float(turn_values.abs().mean()),
        "credit/advantage_std": float(turn_values.std(correction=0)),
        **metrics,
        **branch_metrics,
    }


def informative_groups(advantages_B_K: Tensor, group_index_B: Tensor, num_groups: int) -> Tensor:
    """`informative_K`: whether any turn of any trajectory of each group has a nonzero advantage."""
    nonzero_B = (advantages_B_K.abs() > 1e-8).any(-1)
    return torch.zeros(num_groups, dtype=torch.bool).index_put_((group_index_B,), nonzero_B, accumulate=True)
