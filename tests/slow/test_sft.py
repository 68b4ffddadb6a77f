"""A few real SFT steps with `agentrl.train.sft` on a freshly initialised tiny model."""

from __future__ import annotations

import math
import random

import pytest
import torch
from agentrl.scaffolds.code import expert as code_expert
from agentrl.scaffolds.code import tasks as code_tasks
from agentrl.scaffolds.search import expert as search_expert
from agentrl.scaffolds.search import tasks as search_tasks

from agentrl.tiny.model import tiny_qwen2, tiny_qwen2_config
from agentrl.tiny.tokenizer import render, train_tokenizer
from agentrl.train.sft import run_sft

pytestmark = pytest.mark.slow


def _conversations() -> list[dict]:
    rng = random.Random(0)
    out = []
    for tasks, expert in ((code_tasks, code_expert), (search_tasks, search_expert)):
        schemas = [t.schema for t in tasks.TOOLS]
        for task in tasks.tasks("train")[:8]:
            out.append({"messages": expert.demonstration(task, rng, mistake_rate=0.3), "tools": schemas})
    return out


def test_sft_steps_lower_the_loss_and_move_the_weights(tmp_path):
    torch.manual_seed(0)
    conversations = _conversations()
    tokenizer = train_tokenizer([render(c["messages"], c["tools"]) for c in conversations], vocab_size=2400)
    model = tiny_qwen2(tiny_qwen2_config(len(tokenizer), hidden_size=64, num_hidden_layers=2), seed=0)
    before = [p.detach().clone() for p in model.parameters()]

    metrics = run_sft(
        model,
        tokenizer,
        conversations,
        output_dir=tmp_path,
        max_steps=12,
        batch_size=4,
        lr=3e-3,
        warmup_fraction=0.0,
        logging_steps=1,
        seed=0,
    )

    losses = [loss for _, loss in metrics["loss_history"]]
    assert len(losses) == 12 and all(math.isfinite(loss) for loss in losses)
    assert sum(losses[-3:]) / 3 < sum(losses[:3]) / 3 - 0.5
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_sft_stops_once_the_loss_falls_below_the_threshold(tmp_path):
    torch.manual_seed(0)
    conversations = _conversations()
    tokenizer = train_tokenizer([render(c["messages"], c["tools"]) for c in conversations], vocab_size=2400)
    model = tiny_qwen2(tiny_qwen2_config(len(tokenizer), hidden_size=64, num_hidden_layers=2), seed=0)
    common = dict(output_dir=tmp_path, batch_size=4, lr=3e-3, warmup_fraction=0.0, logging_steps=1, seed=0)

    metrics = run_sft(model, tokenizer, conversations, max_steps=40, stop_at_loss=4.0, **common)

    losses = [loss for _, loss in metrics["loss_history"]]
    assert losses[-1] < 4.0 <= min(losses[:-1]) and len(losses) < 40


def test_sft_command_fine_tunes_a_shipped_tiny_policy_on_context_only_turns(tmp_path):
    import json

    from typer.testing import CliRunner

    from agentrl.cli.app import app
    from agentrl.policy.loading import load_tokenizer
    from agentrl.tiny.build import swe_drills

    rng = random.Random(0)
    data = tmp_path / "retries.jsonl"
    rows = [{"messages": swe_drills.demonstration(rng, mistake_rate=0.0, retry_rate=1.0)} for _ in range(8)]
    assert all(any(m.get("loss") is False for m in r["messages"]) for r in rows)
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["sft", "--data", str(data), "--output", str(out), "--model", "tiny-swe"])
    assert result.exit_code == 0, result.output
    assert "'train_loss': 0." in result.output  # the policy already makes these recoveries
    saved = load_tokenizer(str(out))
    assert saved.chat_template.startswith("{#- The tiny policy")  # saved with the template it loaded with


def test_sft_on_demonstrations_of_a_new_tool_lets_a_run_offer_it(tmp_path):
    """The tiny policy sees no tool schemas, so a run offering only a new tool is refused; after `agentrl sft` on
    conversations that call it, the checkpoint records the tool and the same run may start."""
    import json

    from agentrl.scaffolds.react import ReactScaffold
    from typer.testing import CliRunner

    from agentrl import tool
    from agentrl.cli.app import app
    from agentrl.config import PolicyConfig
    from agentrl.doctor.tool_visibility import check_tool_visibility
    from agentrl.errors import ConfigError

    @tool
    def convert(value: float, source: str, target: str) -> str:
        """Convert between units.

        Args:
            value: The number.
            source: Its unit.
            target: The unit wanted.
        """
        return f"{value * 0.621371:.2f}"

    def demonstration(k: int) -> dict:
        arguments = {"value": k, "source": "km", "target": "mi"}
        call = {"type": "function", "function": {"name": "convert", "arguments": arguments}}
        return {
            "messages": [
                {"role": "system", "content": "Use the tools. Reply with only the final answer."},
                {"role": "user", "content": f"How many miles is {k} km?"},
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "content": convert(k, "km", "mi")},
                {"role": "assistant", "content": convert(k, "km", "mi")},
            ]
        }

    scaffold = ReactScaffold(tools=[convert])
    with pytest.raises(ConfigError, match="cannot see the tools convert"):
        check_tool_visibility(PolicyConfig(model="tiny"), scaffold)
    data, out = tmp_path / "convert.jsonl", tmp_path / "out"
    data.write_text("".join(json.dumps(demonstration(k)) + "\n" for k in range(3, 11)))
    result = CliRunner().invoke(app, ["sft", "--data", str(data), "--output", str(out), "--model", "tiny"])
    assert result.exit_code == 0, result.output
    learned = json.loads((out / "config.json").read_text())["agentrl_trained_tools"]
    assert learned["convert"] == ["source", "target", "value"] and learned["calculate"] == ["expression"]
    check_tool_visibility(PolicyConfig(model=str(out)), scaffold)  # the run may start now
