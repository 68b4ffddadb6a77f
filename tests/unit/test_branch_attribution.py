"""Branch attribution (`trainer.branch_attribution`): under `hard` every shared turn of a rollout tree trains once,
with the mean advantage of its copies, and one learner step differs from `soft` under every loss aggregation,
while merely giving every copy the mean would not under token-mean (hand-computed values for both modes and the
mutations they catch: `test_credit_mutations.py`).
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentrl.config import TrainerConfig
from agentrl.credit.assign import assign_credit
from agentrl.types import StopReason, Task, Trajectory, TrajectoryGroup, Turn

pytestmark = pytest.mark.unit

FAST = settings(max_examples=20, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
TASK = Task("t", "?", answer="Paris")


def _tree(outcomes: list[float], forks: list[tuple[int, int]], turns: int = 3) -> list[Trajectory]:
    """A root rollout and its branches: branch i + 1 forks from trajectory `forks[i][0]` (an earlier one) at turn
    `forks[i][1]`, copying that parent's turns before it token for token; every turn samples 2 own tokens."""
    made: list[Trajectory] = []
    for i, outcome in enumerate(outcomes):
        parent, at = forks[i - 1] if i else (None, None)
        own = [
            Turn((100 * i + 10 + k, 100 * i + 11 + k), (-0.5, -0.5), (1.0, 1.0), "", observation_ids=(5, 5))
            for k in range(turns)
        ]
        if parent is not None:
            parent, at = parent % i, 1 + at % (turns - 1)
            own[:at] = made[parent].turns[:at]
        made.append(
            Trajectory(
                "t",
                "g",
                f"r{i}",
                (1, 2),
                tuple(own),
                StopReason.ANSWERED,
                reward=outcome,
                parent_id=None if parent is None else f"r{parent}",
                branch_turn=at,
            )
        )
    return made


def _turn_spans(trajectory: Trajectory) -> list[range]:
    """Token positions of each turn's sampled tokens."""
    spans, at = [], len(trajectory.prompt_ids)
    for turn in trajectory.turns:
        spans.append(range(at, at + len(turn.completion_ids)))
        at += len(turn.completion_ids) + len(turn.observation_ids)
    return spans


BRANCHED = st.lists(st.sampled_from([0.0, 1.0, 0.5]), min_size=2, max_size=6).flatmap(
    lambda outcomes: st.tuples(
        st.just(outcomes),
        st.lists(st.tuples(st.integers(0, 10), st.integers(0, 10)), min_size=len(outcomes), max_size=len(outcomes)),
    )
)


@FAST
@given(BRANCHED, st.sampled_from(["grpo", "rloo", "mc_grpo"]))
def test_hard_attribution_trains_each_shared_turn_once_with_the_mean_of_its_copies(tree, advantage):
    outcomes, forks = tree
    trajectories = _tree(outcomes, forks)
    group = [TrajectoryGroup(TASK, tuple(trajectories))]
    soft, _ = assign_credit(group, config=TrainerConfig(advantage=advantage, skip_zero_advantage_groups=False))
    hard, metrics = assign_credit(
        group, config=TrainerConfig(advantage=advantage, branch_attribution="hard", skip_zero_advantage_groups=False)
    )
    assert len(soft) == len(hard)  # the same trajectories train (an MC-GRPO pivot drops out of both)
    copies: dict[tuple[int, ...], list[tuple[float, float, bool]]] = {}
    for s, h in zip(soft, hard, strict=True):
        t = next(t for t in trajectories if tuple(t.token_ids) == s.token_ids)
        for span in _turn_spans(t):
            ids = tuple(s.token_ids[span.start : span.stop])
            assert all(s.loss_mask[i] for i in span)  # soft: every copy trains
            trained = {h.loss_mask[i] for i in span}
            assert len(trained) == 1  # a turn trains whole or not at all
            copies.setdefault(ids, []).append((s.advantages[span.start], h.advantages[span.start], trained.pop()))
    masked = 0
    for values in copies.values():
        mean = sum(a for a, _, _ in values) / len(values)
        carriers = [h for _, h, trained in values if trained]
        assert carriers == [pytest.approx(mean, abs=1e-6)]  # exactly one copy trains, with the mean
        masked += len(values) - 1
    assert metrics.get("credit/deduplicated_turns", 0.0) == masked


def _fork_group() -> TrajectoryGroup:
    """P (outcome 1), B forked from P after P's turn 0 (outcome 0), C on its own (outcome 0); turns sample 2
    tokens, tool rounds append 2 observation tokens: every trajectory is [1, 2, t0, t0, 5, 5, t1, t1]."""

    def turn(a: int, obs: tuple[int, ...] = ()) -> Turn:
        return Turn((a, a + 1), (-0.5, -0.5), (1.0, 1.0), "", observation_ids=obs)

    p = Trajectory("t", "g", "P", (1, 2), (turn(10, (5, 5)), turn(12)), StopReason.ANSWERED, reward=1.0)
    b = Trajectory(
        "t", "g", "B", (1, 2), (p.turns[0], turn(22)), StopReason.ANSWERED, reward=0.0, parent_id="P", branch_turn=1
    )
    c = Trajectory("t", "g", "C", (1, 2), (turn(30, (5, 5)), turn(32)), StopReason.ANSWERED, reward=0.0)
    return TrajectoryGroup(TASK, (p, b, c))


def test_hard_and_soft_attribution_put_different_weight_on_the_shared_tokens():
    # GRPO over [1, 0, 0]: mean 1/3, population std √2/3 → A_P = √2, A_B = A_C = −1/√2
    a_p, a_b = math.sqrt(2), -1 / math.sqrt(2)
    soft, _ = assign_credit([_fork_group()], config=TrainerConfig(branch_attribution="soft"))
    hard, metrics = assign_credit([_fork_group()], config=TrainerConfig(branch_attribution="hard"))
    p, b, c = soft
    close = dict(abs=1e-5)  # GRPO's eps = 1e-6 in the std
    assert p.advantages == pytest.approx((0, 0, a_p, a_p, 0, 0, a_p, a_p), **close)
    assert b.advantages == pytest.approx((0, 0, a_b, a_b, 0, 0, a_b, a_b), **close) and b.loss_mask == p.loss_mask
    # hard: P's copy of turn 0 carries the mean (√2 − 1/√2)/2 = 1/(2√2); B's copy leaves the loss
    shared = 1 / (2 * math.sqrt(2))
    hp, hb, hc = hard
    assert hp.advantages == pytest.approx((0, 0, shared, shared, 0, 0, a_p, a_p), **close)
    assert hp.loss_mask == p.loss_mask
    assert hb.loss_mask == (False,) * 6 + (True, True) and hb.advantages[6:] == pytest.approx((a_b, a_b), **close)
    assert hc == c and metrics["credit/deduplicated_turns"] == 1.0
    # the summed weight on the shared tokens (positions 2, 3 of P and B): Σ A = 1/√2 (soft) vs mean = 1/(2√2)
    for position in (2, 3):
        soft_weight = sum(s.advantages[position] * s.loss_mask[position] for s in (p, b))
        hard_weight = sum(s.advantages[position] * s.loss_mask[position] for s in (hp, hb))
        assert (soft_weight, hard_weight) == pytest.approx((1 / math.sqrt(2), shared), **close)
    assert sum(s.num_loss_tokens for s in soft) == 12 and sum(s.num_loss_tokens for s in hard) == 10


@pytest.mark.parametrize("loss_agg", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"])
def test_one_learner_step_differs_between_hard_and_soft_attribution(loss_agg):
    from agentrl.tiny.model import tiny_qwen2, tiny_qwen2_config
    from agentrl.train.learner import Learner

    def step(samples):
        model = tiny_qwen2(tiny_qwen2_config(40, hidden_size=32, num_hidden_layers=1), seed=3).double()
        config = TrainerConfig(lr=1e-3, max_grad_norm=0.0, loss_agg=loss_agg, minibatches_per_step=1)
        metrics = Learner(model, config, pad_token_id=0).update(samples)
        return metrics, torch.cat([p.detach().flatten() for p in model.parameters()])

    soft, _ = assign_credit([_fork_group()], config=TrainerConfig(branch_attribution="soft"))
    hard, _ = assign_credit([_fork_group()], config=TrainerConfig(branch_attribution="hard"))
    # what `hard` did before it took the extra copies out of the loss: every copy trained with the mean advantage
    shared = (soft[0].advantages[2] + soft[1].advantages[2]) / 2
    every_copy = [dataclasses.replace(s, advantages=(0, 0, shared, shared, *s.advantages[4:])) for s in soft[:2]]
    (soft_m, soft_w), (hard_m, hard_w), (copy_m, copy_w) = step(soft), step(hard), step(every_copy + soft[2:])
    assert (soft_m["tokens"], hard_m["tokens"]) == (12.0, 10.0)
    assert abs(hard_m["grad_norm"] - soft_m["grad_norm"]) > 1e-3 * soft_m["grad_norm"]
    assert (hard_w - soft_w).abs().max() > 1e-4  # Adam moves a weight by up to lr = 1e-3
    if loss_agg != "seq-mean-token-mean":
        # n copies of the mean sum to Σ A: re-weighting alone leaves a token-sum update exactly where soft puts it
        assert copy_m["grad_norm"] == pytest.approx(soft_m["grad_norm"], rel=1e-7)
        torch.testing.assert_close(copy_w, soft_w, rtol=0, atol=1e-7)  # Adam: lr·g/(|g| + eps) near g ≈ 0
