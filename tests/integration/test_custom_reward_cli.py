"""A user's own `@reward`, in their own file, loaded by dotted path from the CLI in a one-step `agentrl train`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.integration

USER_FILE = '''
from agentrl import reward


@reward
def always_hundred(answer) -> float | None:
    """A metric only (weight 0): if it leaked into the reward, reward/mean would exceed 1."""
    return None if answer is None else 100.0


@reward(level="turn")
async def called_a_tool(turn) -> float | None:
    return 1.0 if turn.tool_calls else None
'''


def test_custom_reward_from_a_user_file_by_dotted_path(tmp_path):
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "myfile.py").write_text(textwrap.dedent(USER_FILE))
    args = [
        "--scaffold", "search",
        "rewards=[exact_match,mypkg.myfile:always_hundred:0,mypkg.myfile:called_a_tool:0.5]",
        "reward_filters=[gra_gate]",
        "trainer.steps=1", "rollout.prompts_per_step=2", "rollout.samples_per_prompt=2", "rollout.max_turns=2",
        "eval.every_steps=0", "progress=false", "tensorboard=false", f"output_dir={tmp_path}", "name=run",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run([sys.executable, "-m", "agentrl.cli.app", "train", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    step = next(m for m in metrics if m["step"] == 1)
    assert step["reward/always_hundred"] == 100.0 and step["reward/mean"] <= 1.0
    assert "filter/gra_gate/dropped_trajectories" in step
    trajectories = [json.loads(line) for line in (tmp_path / "run" / "trajectories" / "step_000001.jsonl").open()]
    assert len(trajectories) == 4
    assert any(turn["tool_calls"] for t in trajectories for turn in t["turns"])  # the turn reward had work to do
    for t in trajectories:
        assert t["reward_components"]["always_hundred"] == 100.0 or t["answer"] is None
        for turn in t["turns"]:
            judged = turn["reward_components"].get("called_a_tool")
            assert judged == (1.0 if turn["tool_calls"] else None)
            # G-RA: the turn slot counts only on trajectories whose outcome passed the gate
            expected = 0.5 if judged and t["reward"] >= 1.0 else None
            assert turn["reward"] == expected
