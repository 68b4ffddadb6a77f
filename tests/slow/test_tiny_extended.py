"""The shipped `tiny-extended` policy copies names it never saw: it solves held-out easy terminal tasks that the
`tiny` policy it started from cannot."""

import pytest

from agentrl.config import EvalRunConfig
from agentrl.eval.runner import evaluate

pytestmark = pytest.mark.slow


async def held_out_easy_terminal_success(model: str, output) -> float:
    config = EvalRunConfig(
        scaffold="terminal", model=model, tiers=("easy",), samples_per_task=2, temperature=1.0, output=str(output)
    )
    outcome = await evaluate(config)
    assert outcome.summary["infra_errors"] == 0 and outcome.summary["episodes"] == 2 * outcome.summary["tasks"]
    return outcome.summary["success"]


async def test_extended_policy_solves_held_out_easy_terminal_tasks(tmp_path):
    base = await held_out_easy_terminal_success("tiny", tmp_path / "tiny.jsonl")
    extended = await held_out_easy_terminal_success("tiny-extended", tmp_path / "extended.jsonl")
    # held-out tasks name files and directories from a pool no demonstration drew from
    assert extended >= base + 0.1, (base, extended)
