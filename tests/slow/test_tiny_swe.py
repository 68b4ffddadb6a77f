"""The shipped `tiny-swe` policy, where RL on the SWE easy tier starts: on held-out easy tasks it copies the
issue's path into `str_replace` in more episodes than `tiny-extended`, and answers a failed edit with another edit.

Both are counted per episode: `tiny-extended` calls `str_replace` in a few episodes of 36, so a share of its calls
(right paths / calls) rests on a handful of calls and moves by ±0.3 from one sampling seed to the next."""

import json
import re

import pytest

from agentrl.config import EvalRunConfig
from agentrl.eval.runner import evaluate

pytestmark = pytest.mark.slow


async def edit_habits(model: str, output) -> dict[str, float]:
    config = EvalRunConfig(
        scaffold="swe",
        model=model,
        tiers=("easy",),
        samples_per_task=4,
        temperature=1.0,
        max_turns=6,
        max_new_tokens_per_turn=160,
        output=str(output),
    )
    outcome = await evaluate(config)
    assert outcome.summary["infra_errors"] == 0 and outcome.summary["episodes"] == 4 * outcome.summary["tasks"]
    right = retried = 0
    episodes = [json.loads(line) for line in output.read_text().splitlines()]
    for episode in episodes:
        path = re.findall(r"`([^`]*)`", episode["messages"][1]["content"])[0]
        failed = copied = False
        for message in episode["messages"][2:]:
            if message["role"] == "tool":
                failed = message["name"] == "str_replace" and not message["content"].startswith("edited ")
            for call in message.get("tool_calls") or []:
                if call["function"]["name"] == "str_replace" and isinstance(call["function"]["arguments"], dict):
                    copied |= call["function"]["arguments"].get("path") == path
                    retried += failed
        right += copied
    return {"path_right": right / len(episodes), "retries": retried / len(episodes)}


async def test_swe_policy_copies_paths_and_retries_failed_edits(tmp_path):
    extended = await edit_habits("tiny-extended", tmp_path / "extended.jsonl")
    swe = await edit_habits("tiny-swe", tmp_path / "swe.jsonl")
    assert swe["path_right"] >= extended["path_right"] + 0.15, (extended, swe)
    assert swe["retries"] >= 0.1 and swe["retries"] > extended["retries"], (extended, swe)
