"""The LLM-judge PRM scores turns through litellm against a scripted OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import re

import pytest
from agentrl.rewards.judge_prm import JudgePRM

from agentrl.reward import RewardStack
from agentrl.testing import scripted_chat_app, serve_in_thread
from agentrl.types import StopReason, Task, ToolCall, ToolResult, Trajectory, Turn

pytestmark = pytest.mark.integration

TASK = Task("t", "Where is the Quell?", answer="Tolvar")


def tool_turn(text: str, result: ToolResult) -> Turn:
    return Turn(
        (1,),
        (0.0,),
        (0.0,),
        text,
        tool_calls=(ToolCall(result.call_id, "lookup", {"q": text}),),
        tool_results=(result,),
        observation_ids=(2,),
    )


def episode() -> Trajectory:
    turns = (
        tool_turn("look up quell", ToolResult("a", "The Quell is in Tolvar.")),
        tool_turn("look up weather", ToolResult("b", "no such entry", is_error=True, error_type="not_found")),
        tool_turn("look up flaky", ToolResult("c", "ambiguous")),
        tool_turn("look up split", ToolResult("d", "split")),
        tool_turn("look up broken", ToolResult("e", "broken")),
        Turn((1,), (0.0,), (0.0,), "Tolvar"),
    )
    return Trajectory("t", "g", "r", (0,), turns, StopReason.ANSWERED, answer="Tolvar")


class Votes:
    """Scripted judge replies, by the tool result the prompt shows: per item, one reply per vote in turn."""

    def __init__(self):
        self.seen: dict[str, int] = {}
        self.script = {
            "The Quell is in Tolvar.": ["good \\boxed{1}", "\\boxed{1}", "hmm \\boxed{-1}"],  # majority +1
            "no such entry": ["\\boxed{-1}"] * 3,  # −1
            "ambiguous": ["\\boxed{1}", "no verdict", "\\boxed{-1}"],  # valid votes tie → 0
            "split": ["\\boxed{1}", "\\boxed{7}", "\\boxed{1}"],  # out-of-range vote ignored → +1
            "broken": ["FAIL"] * 3,  # every request fails → abstain, never 0
        }

    def __call__(self, messages):
        prompt = messages[-1]["content"]
        key = next(k for k in self.script if f"] {k}" in prompt)
        i = self.seen.get(key, 0)
        self.seen[key] = i + 1
        reply = self.script[key][i % 3]
        if reply == "FAIL":
            raise RuntimeError("judge overloaded")
        return reply


def test_judge_prm_scores_turns_by_majority_through_litellm():
    app = scripted_chat_app(Votes())
    with serve_in_thread(app) as url:
        judge = JudgePRM("judge-model", base_url=url + "/v1", votes=3, concurrency=2, timeout_s=20)
        stack = RewardStack([(judge, 1.0)])
        scored = asyncio.run(stack.score(TASK, episode()))
        assert [t.reward for t in scored.turns] == [1.0, -1.0, 0.0, 1.0, None, None]
        assert scored.turns[0].reward_components == {"judge_prm": 1.0}
        assert judge.stats.requests == 15 and judge.stats.failures == 3 and judge.stats.abstained == 1
        assert judge.stats.unparsable == 2  # "no verdict" and the out-of-range 7
        body = app.state.requests[0]
        assert body["model"] == "judge-model" and body["temperature"] == 0.6
        assert re.search(r"Where is the Quell\?", body["messages"][-1]["content"])

        # the cache answers repeated items; the failed item is asked again (an outage must not stick)
        asyncio.run(stack.score(TASK, episode()))
        assert judge.stats.cache_hits == 4 and judge.stats.requests == 18


def test_judge_timeouts_abstain_and_are_counted():
    async def slow(messages):
        await asyncio.sleep(1.0)
        return "\\boxed{1}"

    with serve_in_thread(scripted_chat_app(slow)) as url:
        judge = JudgePRM("judge-model", base_url=url + "/v1", votes=2, timeout_s=0.2)
        scored = asyncio.run(RewardStack([(judge, 1.0)]).score(TASK, episode()))
    assert all(t.reward is None for t in scored.turns)
    assert judge.stats.failures == 10 and judge.stats.abstained == 5


def test_concurrency_limit_holds():
    in_flight, peak = [0], [0]

    async def counted(messages):
        in_flight[0] += 1
        peak[0] = max(peak[0], in_flight[0])
        await asyncio.sleep(0.05)
        in_flight[0] -= 1
        return "\\boxed{1}"

    with serve_in_thread(scripted_chat_app(counted)) as url:
        judge = JudgePRM("judge-model", base_url=url + "/v1", votes=2, concurrency=2)
        scored = asyncio.run(RewardStack([(judge, 1.0)]).score(TASK, episode()))
    assert [t.reward for t in scored.turns] == [1.0] * 5 + [None]
    assert peak[0] == 2


def test_single_turn_episode_is_judged_and_final_answer_turn_is_masked():
    judge = JudgePRM("m", base_url="http://127.0.0.1:9/v1")
    single = Trajectory(
        "t", "g", "r", (0,), (Turn((1,), (0.0,), (0.0,), "Tolvar"),), StopReason.ANSWERED, answer="Tolvar"
    )
    assert judge.fields(TASK, single, single.turns[0]) is not None
    assert judge.fields(TASK, episode(), episode().turns[-1]) is None
