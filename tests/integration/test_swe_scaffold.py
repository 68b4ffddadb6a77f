"""SWE episodes end to end: a scripted policy fixes every bundled task through the tools and is graded in fresh
sandboxes; `agentrl swe grade` on gold and empty predictions; `agentrl eval --scaffold swe` over native tool calls
from a scripted OpenAI-compatible server on 127.0.0.1."""

import asyncio
import json

import pytest
from agentrl.scaffolds.swe import SweScaffold, bundled
from agentrl.scaffolds.swe.patches import changed_lines
from fastapi import FastAPI
from typer.testing import CliRunner

from agentrl.cli.app import app as cli_app
from agentrl.config import EvalRunConfig, RolloutConfig
from agentrl.eval.runner import evaluate
from agentrl.reward import RewardStack
from agentrl.sandbox.config import SandboxConfig
from agentrl.testing import ScriptedPolicy, serve_in_thread
from agentrl.toolserver.app import create_app
from agentrl.toolserver.client import ToolClient
from agentrl.types import StopReason

pytestmark = pytest.mark.integration

ROLLOUT = RolloutConfig(max_turns=6, max_new_tokens_per_turn=4096, max_tokens_per_episode=65536)


def call(name, **arguments):
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


def edits(patch: str) -> list[dict[str, str]]:
    """The patch as `str_replace` arguments, one per hunk (old text: context and removed lines)."""
    out, path, old, new = [], None, None, None
    for line in patch.splitlines():
        if line.startswith("+++ b/"):
            path = line[6:]
        elif line.startswith("@@"):
            if old is not None:
                out.append({"path": path, "old_str": "\n".join(old), "new_str": "\n".join(new)})
            old, new = [], []
        elif old is not None and line[:1] in (" ", "-", "+") and not line.startswith(("---", "+++")):
            if line[0] != "+":
                old.append(line[1:])
            if line[0] != "-":
                new.append(line[1:])
    out.append({"path": path, "old_str": "\n".join(old), "new_str": "\n".join(new)})
    return out


def gold_responses(prompt: str) -> str:
    """Turn 0: run the visible tests; turn 1: the gold fix as str_replace calls; turn 2: submit."""
    turn = prompt.count("<|im_start|>assistant") - 1
    instance = next(i for i in bundled.instances() if i.problem_statement.strip() in prompt)
    if turn == 0:
        return "Let me run the tests first.\n" + call("run_tests")
    if turn == 1:
        return "\n".join(call("str_replace", **e) for e in edits(instance.patch))
    return call("submit")


@pytest.fixture(scope="module")
def repos():
    return str(bundled.repos_dir())


async def run_all(scaffold, policy, tasks, concurrency=6):
    stack = RewardStack.from_specs(scaffold.reward_names())
    gate = asyncio.Semaphore(concurrency)
    async with ToolClient(app=create_app(list(scaffold.toolsets()))) as tools:

        async def one(task):
            async with gate:
                t = await scaffold.run(task, policy, tools, group_id=task.id, trajectory_id=f"{task.id}/0")
            return await stack.score(task, t)

        return list(await asyncio.gather(*(one(t) for t in tasks)))


async def test_the_gold_fix_through_the_tools_resolves_every_bundled_task(repos, tiny_tokenizer):
    scaffold = SweScaffold(rollout=ROLLOUT)
    tasks = [*scaffold.tasks("train"), *scaffold.tasks("test")]
    assert len(tasks) == len(bundled.instances()) >= 24
    trajectories = await run_all(scaffold, ScriptedPolicy(tiny_tokenizer, gold_responses), tasks)
    by_id = {i.instance_id: i for i in bundled.instances()}
    for task, t in zip(tasks, trajectories, strict=True):
        assert t.stop_reason is StopReason.ANSWERED and len(t.turns) == 3, (task.id, t.error)
        run_tests = t.turns[0].tool_results[0]
        assert not run_tests.is_error and "passed" in run_tests.text and "[pytest exit code 0]" in run_tests.text
        assert all(not r.is_error for r in t.turns[1].tool_results), [r.text for r in t.turns[1].tool_results]
        assert changed_lines(t.answer) == changed_lines(by_id[task.id].patch)
        assert t.reward == 1.0 and t.reward_components == {"swe_resolved": 1.0}, task.id


async def test_an_episode_that_changes_nothing_scores_zero_and_cannot_reset_the_repository(repos, tiny_tokenizer):
    scaffold = SweScaffold(rollout=ROLLOUT, rewards=("swe_resolved", "swe_similarity"))
    hidden = bundled.instances()[0].fail_to_pass[0].split("::")[0].rsplit("/", 1)[1]
    probes = [call("swe_setup", archive_b64="AAAA"), call("find_files", pattern=hidden)]
    probes.append(call("bash", command="python3 -m pytest -q -p no:cacheprovider 2>&1 | tail -1"))
    responses = ["\n".join(probes), call("submit")]
    task = next(t for t in scaffold.tasks("train") if t.id == bundled.instances()[0].instance_id)
    (t,) = await run_all(scaffold, ScriptedPolicy(tiny_tokenizer, responses), [task])
    refused, found, tests = t.turns[0].tool_results
    assert refused.is_error and "already set up" in refused.text
    assert found.text == "no files match"  # the hidden tests are not in the workspace
    assert "passed" in tests.text and "failed" not in tests.text  # pytest works from the shell too
    assert t.stop_reason is StopReason.ANSWERED and len(t.turns) == 2 and t.turns[-1].observation_ids == ()
    assert t.answer == "" and t.reward == 0.0
    assert t.reward_components == {"swe_resolved": 0.0, "swe_similarity": 0.0}


def test_swe_grade_command_gold_resolves_all_and_empty_none(repos, tmp_path):
    instances = bundled.instances()
    runner = CliRunner()
    for name, patch_of in (("gold", lambda i: i.patch), ("empty", lambda i: "")):
        predictions = tmp_path / f"{name}.jsonl"
        rows = [
            {"instance_id": i.instance_id, "model_patch": patch_of(i), "model_name_or_path": name} for i in instances
        ]
        predictions.write_text("".join(json.dumps(r) + "\n" for r in rows))
        out = tmp_path / f"{name}.results.jsonl"
        result = runner.invoke(cli_app, ["swe", "grade", "--predictions", str(predictions), "--out", str(out)])
        assert result.exit_code == 0, result.output
        graded = [json.loads(x) for x in out.read_text().splitlines()]
        summary = json.loads((tmp_path / f"{name}.results.summary.json").read_text())
        assert len(graded) == summary["instances"] == len(instances) and summary["infra_errors"] == 0
        expected = len(instances) if name == "gold" else 0
        assert sum(r["resolved"] for r in graded) == summary["resolved"] == expected, summary
        print(name, json.dumps(summary))


def native_agent() -> FastAPI:
    """An OpenAI-compatible chat endpoint that answers with native `tool_calls`: view the file the issue names,
    fix it with str_replace, submit; then a final message without tool calls."""
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(body: dict) -> dict:
        messages = body["messages"]
        assert {t["function"]["name"] for t in body["tools"]} >= {"bash", "str_replace", "run_tests", "submit"}
        instance = next(i for i in bundled.instances() if i.problem_statement.strip() in messages[1]["content"])
        step = sum(m["role"] == "assistant" for m in messages)
        plan = [("view", {"path": edits(instance.patch)[0]["path"]})]
        plan += [("str_replace", e) for e in edits(instance.patch)] + [("submit", {})]
        if step < len(plan):
            name, arguments = plan[step]
            function = {"name": name, "arguments": json.dumps(arguments)}
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": f"c{step}", "type": "function", "function": function}],
            }
            finish = "tool_calls"
        else:
            message, finish = {"role": "assistant", "content": "Fixed."}, "stop"
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        return {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage,
        }

    return app


async def test_eval_over_native_tool_calls(repos, tmp_path):
    with serve_in_thread(native_agent()) as url:
        config = EvalRunConfig(
            scaffold="swe",
            base_url=url + "/v1",
            model="scripted",
            format="native",
            max_tasks=3,
            max_turns=8,
            output=str(tmp_path / "swe.jsonl"),
        )
        outcome = await evaluate(config)
    assert outcome.summary["episodes"] == 3 and outcome.summary["infra_errors"] == 0
    assert outcome.summary["pass@1"] == 1.0 and outcome.summary["tool_calls"] > 0


async def test_a_grading_sandbox_that_fails_makes_an_infrastructure_failure_not_a_zero(repos, tiny_tokenizer):
    scaffold = SweScaffold(rollout=ROLLOUT, sandbox=SandboxConfig(python="/nonexistent"))
    task = scaffold.tasks("train")[0]
    (t,) = await run_all(scaffold, ScriptedPolicy(tiny_tokenizer, gold_responses), [task])
    assert t.stop_reason is StopReason.INFRA_ERROR and "grading" in t.error
    assert t.reward is None and t.is_infra_failure


async def test_user_tasks_from_parquet_with_a_local_clone(repos, tiny_tokenizer, tmp_path):
    import subprocess

    import datasets

    chosen = [i for i in bundled.instances() if i.tier == "hard"][:2]
    rows = [{**i.to_record(), "FAIL_TO_PASS": json.dumps(list(i.fail_to_pass))} for i in chosen]
    datasets.Dataset.from_list(rows).to_parquet(str(tmp_path / "tasks.parquet"))
    for i in chosen:  # an ordinary (non-bare) clone, checked out elsewhere than base_commit
        slug = i.repo.replace("/", "__")
        subprocess.run(
            ["git", "clone", "-q", "-b", "main", f"{repos}/{slug}", str(tmp_path / "repos" / slug)], check=True
        )
    scaffold = SweScaffold(
        rollout=ROLLOUT, tasks_file=str(tmp_path / "tasks.parquet"), repos_dir=str(tmp_path / "repos")
    )
    tasks = scaffold.tasks("train") + scaffold.tasks("test")
    assert sorted(t.id for t in tasks) == sorted(i.instance_id for i in chosen)
    trajectories = await run_all(scaffold, ScriptedPolicy(tiny_tokenizer, gold_responses), tasks)
    assert [t.reward for t in trajectories] == [1.0, 1.0], [t.error for t in trajectories]
