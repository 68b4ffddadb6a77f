"""What each reward costs per scoring pass: `RewardStack.score_batch` runs components one after another over all
trajectories and reports each one's seconds, policy probe forward passes and own counters."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import pytest
from agentrl.rewards.info_gain import InfoGain

from agentrl.reward import RewardStack, reward
from agentrl.types import StopReason, Task, ToolCall, ToolResult, Trajectory, Turn

pytestmark = pytest.mark.unit

TASK = Task("t", "?", answer="Paris")


@dataclass
class ScoreStats:
    forwards: int = 0


class ProbePolicy:
    """A model double that answers every probe with one batched 'forward pass' per call."""

    class Tokenizer:
        def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
            return [7, 8]

    def __init__(self) -> None:
        self.tokenizer = self.Tokenizer()
        self.score_stats = ScoreStats()

    async def score_continuations(self, prefixes, continuations):
        self.score_stats.forwards += 1
        return [[-0.1 * len(p)] * len(c) for p, c in zip(prefixes, continuations, strict=True)]


def rollout(tid: str, *, stop=StopReason.ANSWERED) -> Trajectory:
    tool = Turn(
        (1,),
        (-0.5,),
        (1.0,),
        "",
        tool_calls=(ToolCall("c", "lookup", {}),),
        tool_results=(ToolResult("c", "ok"),),
        observation_ids=(2, 2),
    )
    answer = Turn((3,), (-0.5,), (1.0,), "")
    return Trajectory("t", "g", tid, (0,), (tool, tool, answer), stop, answer="Paris")


@reward
def slow_outcome(answer):
    time.sleep(0.02)
    return 1.0 if answer == "Paris" else 0.0


def test_score_batch_reports_seconds_forwards_and_probes_per_component():
    gain = InfoGain("prob_diff")
    stack = RewardStack([(slow_outcome, 1.0), (gain, 1.0)])
    policy = ProbePolicy()
    items = [(TASK, rollout("a")), (TASK, rollout("b")), (TASK, rollout("x", stop=StopReason.INFRA_ERROR))]
    scored, costs = asyncio.run(stack.score_batch(items, policy=policy))
    assert [t.reward is None for t in scored] == [False, False, True]  # the infra failure stays unscored
    assert scored[0].turns[0].reward_components["info_gain"] == pytest.approx(scored[1].turns[0].reward)
    # the sync outcome reward runs once per live trajectory, one after another: ≥ 2 × 20 ms
    assert costs["reward_cost/slow_outcome/seconds"] >= 0.04
    assert costs["reward_cost/slow_outcome/policy_forwards"] == 0.0
    # 2 trajectories × 3 histories (before turn 0, 1, 2) probed, one double-'forward' per trajectory
    assert costs["reward_cost/info_gain/probes"] == 6.0
    assert costs["reward_cost/info_gain/policy_forwards"] == 2.0
    assert costs["reward_cost/info_gain/seconds"] >= 0.0
    # a second pass reports that pass's increase, not the running total
    _, again = asyncio.run(stack.score_batch(items[:1], policy=policy))
    assert again["reward_cost/info_gain/probes"] == 3.0 and gain.probes == 9


def test_score_is_score_batch_of_one():
    stack = RewardStack([(slow_outcome, 2.0)])
    one = asyncio.run(stack.score(TASK, rollout("a")))
    (batched,), _ = asyncio.run(stack.score_batch([(TASK, rollout("a"))]))
    assert one == batched and one.reward == 2.0 and one.reward_components == {"slow_outcome": 1.0}


@dataclass
class JudgeStats:
    requests: int = 0
    seconds: float = 0.0


class ConcurrentJudge:
    """A reward object whose `stats.seconds` sums request latencies, as a judge running requests in parallel does."""

    def __init__(self) -> None:
        self.stats = JudgeStats()

    async def score(self, answer):
        self.stats.requests += 1
        self.stats.seconds += 5.0  # as if each of its overlapping requests took 5 s
        return 1.0

    def as_reward(self):
        return reward(self.score, name="judge")


def test_a_rewards_own_seconds_counter_does_not_replace_the_phase_wall_time() -> None:
    judge = ConcurrentJudge()
    stack = RewardStack([(judge, 1.0)])
    _, costs = asyncio.run(stack.score_batch([(TASK, rollout(f"r{i}")) for i in range(4)]))
    assert costs["reward_cost/judge/busy_seconds"] == 20.0 and costs["reward_cost/judge/requests"] == 4.0
    assert costs["reward_cost/judge/seconds"] < 1.0


def test_a_reward_whose_every_request_failed_is_an_outage_that_stops_the_run():
    from agentrl.errors import InfraError
    from agentrl.judge import Judge
    from agentrl.reward import RewardOutages

    class Grader(Judge):
        rubric = "{answer}"

    grader = Grader("m", base_url="http://127.0.0.1:9/v1")
    grader.stats.last_error = "APIConnectionError: Connection error."
    rewards = [grader.as_reward(), reward(lambda answer: 1.0, name="plain")]
    outages = RewardOutages(limit=2)
    down = {"reward_cost/grader/requests": 8.0, "reward_cost/grader/failures": 8.0}
    warning = outages.check(rewards, dict(down), step=1)
    assert warning == (
        "warning: step 1: reward grader scored nothing: 8 of 8 requests failed (APIConnectionError: Connection "
        "error.); the run stops after 2 such steps in a row (reward_outage_steps)"
    )
    some = {"reward_cost/grader/requests": 8.0, "reward_cost/grader/failures": 7.0}
    costs = dict(some)
    assert outages.check(rewards, costs, step=2) is None and costs["reward/failed"] == 0.0  # one vote came back
    assert outages.check(rewards, dict(down), step=3) is not None  # the streak starts again
    with pytest.raises(InfraError, match="grader scored nothing: 8 of 8 requests failed .* 2 steps in a row"):
        outages.check(rewards, dict(down), step=4)
    assert RewardOutages(limit=0).check(rewards, dict(down), step=1).endswith("the run goes on (reward_outage_steps)")
