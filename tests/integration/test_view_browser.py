"""`agentrl view` in a real chromium, over the run directory of a real 2-step `agentrl train` (ARPO branching, so
groups have trees): what the page shows is checked against the trajectory files, model-written markup renders as
text and never runs, and the server stays on loopback and inside the run directory."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from agentrl.tools.gui.launcher import CHROMIUM_ARGS, chromium_path, gui_unavailable_reason

pytestmark = [pytest.mark.integration, pytest.mark.slow]

if (reason := gui_unavailable_reason()) is not None:
    pytest.skip(f"the view tests need playwright and chromium: {reason}", allow_module_level=True)

TRAIN = [
    "trainer.steps=2",
    "rollout.prompts_per_step=4",
    "rollout.samples_per_prompt=4",
    "rollout.branching=arpo",
    "eval.max_tasks=8",
    "progress=false",
    "tensorboard=false",
]
PAYLOAD = '<script>window.__xss = 1</script><img src=x onerror="window.__xss = 2"><b>bold</b>'


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A 2-step run, plus a step file whose tool result, answer and parse error carry markup (written by the real
    trajectory writer from a real trajectory of the run)."""
    from agentrl.runlog.step_stats import write_trajectories
    from agentrl.types import Task, TrajectoryGroup, trajectory_from_json

    root = tmp_path_factory.mktemp("view")
    command = [sys.executable, "-m", "agentrl.cli.app", "train", *TRAIN, f"output_dir={root}", "name=run"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    run = root / "run"
    source = next(r for r in records(run / "trajectories" / "step_000001.jsonl") if r["turns"][0]["tool_results"])
    original = trajectory_from_json(source)
    first = original.turns[0]
    hostile = dataclasses.replace(first.tool_results[0], content=PAYLOAD, is_error=True, error_type="failed")
    turns = (dataclasses.replace(first, tool_results=(hostile,), parse_error=PAYLOAD), *original.turns[1:])
    trajectory = dataclasses.replace(original, turns=turns, answer=PAYLOAD, trajectory_id="s3/hostile/0")
    task = Task(original.task_id, PAYLOAD, scaffold="code")
    write_trajectories(run, "step_000003.jsonl", [TrajectoryGroup(task, (trajectory,))])
    return run


@pytest.fixture(scope="module")
def server(run_dir):
    """`agentrl view RUN --port 0`, as a user starts it; yields its URL."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "agentrl.cli.app", "view", str(run_dir), "--port", "0"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline()
    match = re.search(r"(http://\S+/)", line)
    assert match, f"{line!r} {proc.stderr.read() if proc.poll() is not None else ''}"
    yield match[1]
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        chromium = driver.chromium.launch(executable_path=chromium_path(), args=list(CHROMIUM_ARGS))
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, server):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.set_default_timeout(15_000)
    yield page
    context.close()
    assert not errors, errors


def test_a_step_lists_its_groups_and_filters_them_as_the_file_says(page, server, run_dir):
    lines = records(run_dir / "trajectories" / "step_000001.jsonl")
    page.goto(server)
    page.click("#steps tr:has(td:text-is('1')) a.step-link")  # step 1 on the timeline's table
    page.wait_for_function("() => location.hash === '#/file/step_000001.jsonl'")
    page.wait_for_selector(".group")
    assert page.text_content(".counts") == f"{len(lines)} of {len(lines)} trajectories, 4 groups"
    shown = page.locator("tr.traj-row").evaluate_all("rows => rows.map(r => r.dataset.trajectory)")
    assert shown == [r["trajectory_id"] for r in lines]

    page.fill("input[name=reward_min]", "1")
    page.click("form.filters button")
    page.wait_for_function("() => location.hash.includes('reward_min=1')")
    page.wait_for_selector(".counts >> text=/^\\d+ of/")
    winners = [r["trajectory_id"] for r in lines if r["reward"] is not None and r["reward"] >= 1]
    page.wait_for_function(f"() => document.querySelectorAll('tr.traj-row').length === {len(winners)}")
    shown = page.locator("tr.traj-row").evaluate_all("rows => rows.map(r => r.dataset.trajectory)")
    assert shown == winners

    ids = " ".join(f"{r['trajectory_id']} {r['task_id']}" for r in lines)
    answer = next(r["answer"] for r in lines if r["answer"] and len(r["answer"]) >= 4 and r["answer"] not in ids)
    page.goto(f"{server}#/file/step_000001.jsonl?q={answer}")
    page.wait_for_function("() => !document.querySelector('form.filters input[name=reward_min]').value")
    having = [r["trajectory_id"] for r in lines if answer in json.dumps(r["messages"]) or answer in r["answer"]]
    shown = page.locator("tr.traj-row").evaluate_all("rows => rows.map(r => r.dataset.trajectory)")
    assert shown == having


def test_a_trajectory_shows_its_turns_calls_results_tokens_and_credit_as_recorded(page, server, run_dir):
    lines = records(run_dir / "trajectories" / "step_000001.jsonl")
    index, record = next((i, r) for i, r in enumerate(lines) if (t := r["turns"][0])["tool_calls"] and t["trained"])
    page.goto(f"{server}#/file/step_000001.jsonl")
    page.click(f"tr.traj-row[data-trajectory='{record['trajectory_id']}'] a")
    page.wait_for_selector(".turn")
    assert page.evaluate("location.hash") == f"#/file/step_000001.jsonl/t/{index}"
    assert page.locator(".turn").count() == len(record["turns"])
    first, shown = record["turns"][0], page.locator(".turn").first
    call = first["tool_calls"][0]
    assert shown.locator(".tool-call strong").text_content() == call["name"]
    assert json.loads(shown.locator(".tool-call pre").text_content()) == call["arguments"]
    assert shown.locator(".tool-result pre").text_content() == first["tool_results"][0]["content"]
    assert shown.locator(".badge.advantage").text_content().startswith(f"advantage {first['advantage']:.4f}")
    tokens = shown.locator(".tok")
    assert tokens.count() == len(first["completion_ids"])

    k = min(range(len(first["logprobs"])), key=lambda i: first["logprobs"][i])  # a token the sampler doubted
    tokens.nth(k).hover()
    tip = page.text_content("#tooltip")
    assert f"id       {first['completion_ids'][k]}" in tip
    assert f"logprob  {first['logprobs'][k]:.5f}" in tip and f"learner  {first['learner_logprobs'][k]:.5f}" in tip
    page.select_option("select.mode", "gap")
    assert "…" in page.text_content(".legend")  # the trained turn has learner log-probs to colour by

    page.click("details.prompt summary")
    assert "<|im_start|>" in page.text_content("details.prompt pre")  # the prompt as the model read it


def test_held_out_episodes_sit_beside_the_training_ones_and_two_steps_compare(page, server, run_dir):
    evaluated = records(run_dir / "trajectories" / "eval_step_000002.jsonl")
    page.goto(f"{server}#/file/step_000002.jsonl")
    page.click(".tabs >> text=held-out episodes")
    page.wait_for_function("() => location.hash.endsWith('eval_step_000002.jsonl')")
    page.wait_for_selector(".group")
    assert page.locator("tr.traj-row").count() == len(evaluated)

    task = evaluated[0]["task_id"]
    page.locator(".group .compare-link").first.click()
    page.wait_for_selector(".side.right .detail dl.facts")
    files = page.locator(".side select.file").evaluate_all("selects => selects.map(s => s.value)")
    assert files == ["eval_step_000002.jsonl", "eval_step_000000.jsonl"]
    for side in ("left", "right"):
        assert task in page.text_content(f".side.{side} .detail dl.facts")


def test_a_branching_group_shows_its_tree_with_where_each_fork_left(page, server, run_dir):
    lines = records(run_dir / "trajectories" / "step_000001.jsonl")
    forks = [r for r in lines if r["parent_id"]]
    assert forks, "the ARPO run forked nowhere"
    group = forks[0]["group_id"]
    page.goto(f"{server}#/file/step_000001.jsonl")
    page.click(f".group[data-group='{group}'] .tree-link")
    page.wait_for_selector("ul.tree")
    for fork in (r for r in forks if r["group_id"] == group):
        node = page.locator(f"li.node[data-trajectory='{fork['trajectory_id']}']")
        parent = node.locator("xpath=ancestor::li[1]")
        assert parent.get_attribute("data-trajectory") == fork["parent_id"]
        assert f"forked after turn {fork['branch_turn'] - 1}: entropy" in node.locator(":scope > .fork").text_content()


def test_markup_the_model_or_a_tool_wrote_shows_as_text_and_never_runs(page, server):
    page.goto(f"{server}#/file/step_000003.jsonl")
    page.wait_for_selector("tr.traj-row")
    assert PAYLOAD in page.text_content("tr.traj-row")  # the answer, in the list
    page.click("tr.traj-row a")
    page.wait_for_selector(".tool-result.error")
    assert page.text_content(".tool-result.error pre") == PAYLOAD
    assert page.text_content(".tool-result.error .error-type") == "failed"
    assert page.text_content(".parse-error .text") == PAYLOAD
    page.wait_for_timeout(300)  # an onerror handler would have fired by now
    assert page.evaluate("window.__xss") is None
    assert page.locator("#main script, #main img, #main b").count() == 0


def test_the_server_listens_on_loopback_and_reads_nothing_outside_the_run(server, run_dir, tmp_path):
    assert server.startswith("http://127.0.0.1:")
    secret = tmp_path / "secret.jsonl"
    secret.write_text((run_dir / "trajectories" / "step_000001.jsonl").read_text())
    link = run_dir / "trajectories" / "step_000009.jsonl"
    os.symlink(secret, link)
    try:
        with httpx.Client(base_url=server) as client:
            refused = client.get("/api/files/step_000009.jsonl/trajectories/0")
            assert refused.status_code == 404 and "outside the run directory" in refused.json()["error"]
            for path in ("/api/files/..%2Fconfig.toml/groups", "/static/..%2F..%2Fview%2Fapp.py"):
                assert client.get(path).status_code == 404
            assert client.get("/api/files/config.toml/groups").json()["error"].startswith("not a trajectory file")
            assert client.get("/api/run", headers={"Host": "attacker.example"}).status_code == 400
            page = client.get("/")
            assert "script-src 'self'" in page.headers["content-security-policy"]
    finally:
        link.unlink()
