"""Held-out success is honest about infrastructure failures: `Trainer.evaluate` and `agentrl eval` count them per
scaffold next to success, keep a scaffold whose every episode failed, and fail an evaluation that measured
nothing instead of reporting a success of 0."""

import json
import re

import pytest
from agentrl.scaffolds.code.tools import calculate
from agentrl.scaffolds.search import tasks as search_tasks
from agentrl.scaffolds.search.tools import lookup
from typer.testing import CliRunner

from agentrl.cli.app import app
from agentrl.config import EvalRunConfig, load_config
from agentrl.errors import InfraError
from agentrl.eval.runner import evaluate
from agentrl.testing import scripted_chat_app, serve_in_thread
from agentrl.toolserver.app import create_app
from agentrl.trainer import Trainer

pytestmark = pytest.mark.integration

SMALL = ["rollout.max_turns=2", "eval.max_tasks=6", "eval.every_steps=0", "progress=false", "tensorboard=false"]
"""The code+search mix: six held-out tasks, taken alternately, three of each scaffold."""


def episodes(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_trainer_keeps_a_scaffold_whose_every_episode_failed(tmp_path):
    with serve_in_thread(create_app([calculate])) as url:  # no `lookup`: search episodes get no session
        trainer = Trainer(load_config(None, [*SMALL, f"tool_servers={url}"]), tmp_path)
        try:
            metrics = trainer.evaluate(0)
        finally:
            trainer.close()
    assert metrics["eval/infra_errors/search"] == 3 and metrics["eval/episodes/search"] == 0
    assert "eval/success/search" not in metrics  # no valid episode, no success rate; the scaffold is still there
    assert metrics["eval/infra_errors/code"] == 0 and metrics["eval/episodes/code"] == 3
    assert metrics["eval/success"] == metrics["eval/success/code"]  # over the valid episodes only
    assert metrics["eval/infra_errors"] == 3 and metrics["eval/episodes"] == 3
    written = episodes(tmp_path / "trajectories" / "eval_step_000000.jsonl")
    assert [e["stop_reason"] for e in written].count("infra_error") == 3


def test_a_run_whose_evaluation_failed_entirely_stops_with_the_cause(tmp_path):
    with serve_in_thread(create_app([calculate, lookup])) as url:  # up while the run checks it, gone when it runs
        config = load_config(None, [*SMALL, "eval.every_steps=1", "trainer.steps=1", f"tool_servers={url}"])
        trainer = Trainer(config, tmp_path)
    with pytest.raises(InfraError, match=r"every episode of the evaluation at step 0 failed \(6 infrastructure") as e:
        trainer.run()
    assert f"the first: ToolServerUnavailable: tool server {url} is down" in str(e.value)
    written = episodes(tmp_path / "trajectories" / "eval_step_000000.jsonl")
    assert len(written) == 6 and all(e["stop_reason"] == "infra_error" for e in written)
    assert not (tmp_path / "checkpoints").exists()


async def test_agentrl_eval_counts_a_failing_scaffold_next_to_the_others(tmp_path):
    search_prompts = {t.prompt for t in search_tasks.tasks("test")}

    def reply(messages):
        if messages[1]["content"] in search_prompts:
            raise RuntimeError("the search deployment is down")  # HTTP 500 for every search request
        return "4"

    config = dict(scaffold="code+search", model="scripted", format="native", max_tasks=6, max_retries=0)
    with serve_in_thread(scripted_chat_app(reply)) as url:
        outcome = await evaluate(EvalRunConfig(**config, base_url=url + "/v1", output=str(tmp_path / "mix.jsonl")))
    s = outcome.summary
    assert s["infra_errors/search"] == 3 and s["episodes/search"] == 0 and s["success/search"] is None
    assert s["infra_errors/code"] == 0 and s["episodes/code"] == 3 and s["success/code"] == s["success"]
    assert s["infra_errors"] == 3 and s["episodes"] == 3
    assert re.search(r"infra_errors/search\s+3", outcome.text) and re.search(r"success/search\s+-", outcome.text)
    assert {r["scaffold"] for r in episodes(tmp_path / "mix.jsonl")} == {"code", "search"}
    outcome.require_valid()  # half of it measured something: not an error


def test_agentrl_eval_exits_non_zero_when_every_episode_failed(tmp_path):
    out = tmp_path / "down.jsonl"
    server = scripted_chat_app(lambda messages: 1 / 0)
    with serve_in_thread(server) as url:
        args = ["eval", "--scaffold", "code", "--base-url", url + "/v1", "--model", "scripted", "--output", str(out)]
        result = CliRunner().invoke(app, [*args, "max_tasks=2", "max_retries=0"])
    assert result.exit_code == 1, result.output
    assert re.search(r"infra_errors\s+2", result.output) and re.search(r"\n\s+success\s+-\n", result.output)
    error = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "every episode of the evaluation" in error[0] and "InternalServerError" in error[0]
    summary = json.loads(out.with_suffix(".summary.json").read_text())
    assert summary["episodes"] == 0 and summary["infra_errors"] == 2 and summary["success"] is None
