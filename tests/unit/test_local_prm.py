"""The local transformers PRM, with the shipped tiny policy as its generative model."""

from __future__ import annotations

import asyncio

import pytest
from agentrl.rewards.local_prm import LocalPRM

from agentrl.reward import RewardStack
from agentrl.types import StopReason, Task, ToolCall, ToolResult, Trajectory, Turn

pytestmark = pytest.mark.unit

TASK = Task("t", "Where is the Quell?", answer="Tolvar")


def episode() -> Trajectory:
    def tool_turn(q, result, is_error=False):
        return Turn(
            (1,),
            (0.0,),
            (0.0,),
            "",
            tool_calls=(ToolCall("c", "lookup", {"q": q}),),
            tool_results=(ToolResult("c", result, is_error=is_error),),
            observation_ids=(2,),
        )

    turns = (
        tool_turn("quell", "The Quell is in Tolvar City, a long way north of the sea."),
        tool_turn("xyz", "not found", is_error=True),
        Turn((1,), (0.0,), (0.0,), "Tolvar"),
    )
    return Trajectory("t", "g", "r", (0,), turns, StopReason.ANSWERED, answer="Tolvar")


@pytest.fixture(scope="module")
def prm():
    return LocalPRM("tiny")


def test_generative_prm_scores_every_turn_in_one_batched_forward(prm):
    scored = asyncio.run(RewardStack([(prm, 1.0)]).score(TASK, episode()))
    values = [t.reward for t in scored.turns]
    assert prm.stats.forwards == 1 and prm.stats.rows == 3
    assert all(0.0 < v < 1.0 for v in values)
    assert scored.turns[0].reward_components == {"local_prm": values[0]}
    # padding does not change a row's score: each prompt alone gives the same probability
    alone = [prm.score_texts([prm.prompt(TASK, turn)])[0] for turn in episode().turns]
    assert values == pytest.approx(alone, abs=1e-5)


def test_concurrent_trajectories_share_forward_passes(prm):
    before = prm.stats.forwards

    async def three():
        return await asyncio.gather(*(prm.turn_values(TASK, episode()) for _ in range(3)))

    values = asyncio.run(three())
    assert prm.stats.forwards - before == 1  # 9 rows, one forward
    assert values[0] == values[1] == values[2]


def test_generative_score_is_good_over_good_plus_bad(prm):
    import torch

    model, tok = prm._load()
    text = prm.prompt(TASK, episode().turns[0])
    ids = torch.tensor([tok.encode(text, add_special_tokens=False)])
    with torch.no_grad():
        p = torch.softmax(model(ids).logits[0, -1].float(), -1)
    good, bad = tok.encode(" good", add_special_tokens=False)[0], tok.encode(" bad", add_special_tokens=False)[0]
    assert prm.score_texts([text])[0] == pytest.approx((p[good] / (p[good] + p[bad])).item(), abs=1e-5)


def test_classifier_prm_gives_label_probabilities():
    import torch

    torch.manual_seed(0)  # the tiny policy has no classification head: transformers initialises one
    prm = LocalPRM("tiny", kind="classifier", max_batch_size=2)
    values = asyncio.run(prm.turn_values(TASK, episode()))
    assert len(values) == 3 and all(0.0 <= v <= 1.0 for v in values)
    assert prm.stats.forwards == 2  # 3 rows in chunks of 2
    with pytest.raises(ValueError):
        LocalPRM("tiny", kind="regressor")  # type: ignore[arg-type]
