"""`agentrl swe synth`: training tasks made by injecting bugs into the bundled training repositories, checked
by grading them afresh in sandboxes and by fixing one through the scaffold's tools."""

import asyncio
import io
import json
import tarfile

import pytest
from agentrl.scaffolds.swe import SweScaffold, bundled
from agentrl.scaffolds.swe.grading import grade_many
from agentrl.scaffolds.swe.instances import SweInstance, load_instances, repository_archive
from agentrl.scaffolds.swe.synthesis import PROBE_PATCH, synthesize
from typer.testing import CliRunner

from agentrl.cli.app import app as cli_app
from agentrl.config import RolloutConfig
from agentrl.reward import RewardStack
from agentrl.testing import ScriptedPolicy
from agentrl.toolserver.app import create_app
from agentrl.toolserver.client import ToolClient
from agentrl.types import StopReason

pytestmark = pytest.mark.integration

SOURCES = ("agentrl-swe__geom-1", "agentrl-swe__pages-1", "agentrl-swe__clock-1")


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    out = tmp_path_factory.mktemp("synth")
    chosen = [i for i in bundled.instances() if i.instance_id in SOURCES]
    report = synthesize(chosen, bundled.repos_dir(), out, per_task=2, seed=3)
    return report, load_instances(report.tasks_file)


def file_at_base(instance: SweInstance, repos_dir, path: str) -> str:
    with tarfile.open(fileobj=io.BytesIO(repository_archive(instance, repos_dir))) as archive:
        return archive.extractfile(path).read().decode()


def test_each_training_task_yields_easy_tasks_and_held_out_ones_pass_through(made):
    report, written = made
    assert set(report.synthesized) == {"agentrl-swe__geom-1", "agentrl-swe__pages-1"}  # clock-1 is held out
    assert all(n == 2 for n in report.synthesized.values()) and report.candidates >= 4
    new = [i for i in written if "-synth-" in i.instance_id]
    assert len(new) == 4 and report.copied == 3
    by_id = {i.instance_id: i for i in bundled.instances()}
    for source_id in SOURCES:  # copied through unchanged
        assert next(i for i in written if i.instance_id == source_id) == by_id[source_id]
    for instance in new:
        source = by_id[instance.instance_id.split("-synth-")[0]]
        assert (instance.split, instance.tier) == ("train", "easy")
        assert instance.test_patch == source.test_patch and instance.visible_tests == source.visible_tests
        assert instance.fail_to_pass and set(instance.fail_to_pass) | set(instance.pass_to_pass) == {
            *source.fail_to_pass,
            *source.pass_to_pass,
        }
        # The statement quotes the expression as the file holds it, exactly once.
        path, function, wrong, right = instance.problem_statement.split("`")[1:8:2]
        text = file_at_base(instance, report.repos_dir, path)
        assert text.count(wrong) == 1 and wrong != right and function.split(".")[-1] in text


def test_graded_afresh_the_gold_patch_resolves_and_the_bug_is_caught(made):
    report, written = made
    new = [i for i in written if "-synth-" in i.instance_id]
    jobs = [(i, i.patch) for i in new] + [(i, PROBE_PATCH) for i in new] + [(i, "") for i in new]
    results = asyncio.run(grade_many(jobs, str(report.repos_dir), concurrency=2))
    gold, probe, empty = results[: len(new)], results[len(new) : 2 * len(new)], results[2 * len(new) :]
    assert all(r.resolved for r in gold), [r.to_json() for r in gold]
    for instance, r in zip(new, probe, strict=True):
        assert r.status == "unresolved" and not r.infra_failure
        assert {t for t, outcome in r.tests.items() if outcome != "passed"} == set(instance.fail_to_pass)
    assert not any(r.resolved for r in empty)


def test_the_scaffold_trains_on_them_and_a_scripted_fix_resolves_one(made, tiny_tokenizer):
    report, written = made
    scaffold = SweScaffold(
        rollout=RolloutConfig(max_turns=4, max_new_tokens_per_turn=4096, max_tokens_per_episode=65536),
        tasks_file=str(report.tasks_file),
        repos_dir=str(report.repos_dir),
    )
    train = scaffold.tasks("train")
    assert {t.id for t in scaffold.tasks("test")} == {"agentrl-swe__clock-1"}
    task = next(t for t in train if "-synth-" in t.id)
    path, _, wrong, right = task.prompt.split("`")[1:8:2]

    def fix(prompt: str) -> str:
        turn = prompt.count("<|im_start|>assistant") - 1
        name, arguments = (
            ("str_replace", {"path": path, "old_str": wrong, "new_str": right})
            if turn == 0
            else (
                "submit",
                {},
            )
        )
        return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"

    async def episode():
        async with ToolClient(app=create_app(list(scaffold.toolsets()))) as tools:
            t = await scaffold.run(task, ScriptedPolicy(tiny_tokenizer, fix), tools, group_id="g", trajectory_id="t")
            return await RewardStack.from_specs(scaffold.reward_names()).score(task, t)

    t = asyncio.run(episode())
    assert t.stop_reason is StopReason.ANSWERED and t.reward == 1.0, (t.error, t.answer)


def test_synth_command_writes_a_task_set_and_rejects_foreign_tasks_without_repos(tmp_path):
    runner = CliRunner()
    tasks = tmp_path / "one.jsonl"
    geom = next(i for i in bundled.instances() if i.instance_id == "agentrl-swe__geom-1")
    tasks.write_text(json.dumps(geom.to_record()) + "\n")
    result = runner.invoke(cli_app, ["swe", "synth", "--out", str(tmp_path / "x"), "--tasks", str(tasks)])
    assert result.exit_code == 2 and "--repos-dir" in result.output
    args = ["swe", "synth", "--out", str(tmp_path / "y"), "--tasks", str(tasks), "--repos-dir"]
    result = runner.invoke(cli_app, [*args, str(bundled.repos_dir()), "--per-task", "1", "--no-keep-sources"])
    assert result.exit_code == 0, result.output
    assert "1 tasks made from 1 training tasks" in result.output
    (written,) = load_instances(tmp_path / "y" / "tasks.jsonl")
    assert written.instance_id.startswith("agentrl-swe__geom-1-synth-")
    assert sorted(p.name for p in (tmp_path / "y" / "repos").iterdir()) == [written.repo.replace("/", "__")]
