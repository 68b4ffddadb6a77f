"""Every example runs unchanged (one training step, `AGENTRL_EXAMPLE_STEPS=1`) and shows what its docstring says:
the training examples' tiny policy calls its tool and earns reward from the first step, the judge example's judge
credits a paraphrase exact match misses, the gateway example records and trains on its agents' sessions.
(`examples/mcp_server.py` is the MCP server of `tests/integration/test_mcp_tools.py`.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).parents[2] / "examples"
ENV = {**os.environ, "AGENTRL_EXAMPLE_STEPS": "1", "HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def run_example(name: str, tmp_path: Path) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name)], cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.parametrize("name", ["notebook.py", "train_react_custom_tool.py", "train_openai_agent.py"])
def test_a_training_example_earns_reward_from_its_first_step(name, tmp_path):
    out = run_example(name, tmp_path)
    found = re.search(r"run directory: (\S+); held-out success (\d\.\d\d) → (\d\.\d\d)", out)
    assert found, out[-2000:]
    metrics = [json.loads(line) for line in (Path(found[1]) / "metrics.jsonl").read_text().splitlines()]
    step = next(m for m in metrics if m["step"] == 1)
    assert step["reward/mean"] > 0 and step["tool_calls/mean"] > 0, step  # the policy uses the tool it was given
    assert step.get("train/skipped", 0.0) == 0.0  # and the step trained on something
    assert float(found[2]) > 0 and f"{metrics[0]['eval/success']:.2f}" == found[2]  # held-out, before training


def test_the_judge_example_credits_a_paraphrase(tmp_path):
    out = run_example("custom_judge.py", tmp_path)
    paraphrase = next(line for line in out.splitlines() if line.startswith("'It is kept in Tolvar City.'"))
    assert "'exact_match': 0.0" in paraphrase and "'answer_judge': 1.0" in paraphrase
    assert "failures=0" in out


def test_the_agents_sdk_example_records_and_trains(tmp_path):
    pytest.importorskip("agents", reason="the example needs openai-agents")
    out = run_example("gateway_agents_sdk.py", tmp_path)
    assert "recorded 12 sessions" in out and "'trainable': 12" in out and "'groups': 3" in out
