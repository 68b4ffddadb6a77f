"""The viewer's reading of a run directory (`agentrl/view/`) and what the trajectory writer records for it: files
read by byte offset while they grow or are rewritten, filters and text search, paths that lead out of the run
refused, branch trees with their fork entropies, and each turn's advantage and learner log-probs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agentrl.credit.assign import trajectory_sample
from agentrl.errors import InputError
from agentrl.rollout.branching import segment_entropy
from agentrl.runlog.step_stats import write_trajectories
from agentrl.runlog.turn_credit import TurnCredit
from agentrl.types import StopReason, Task, ToolCall, ToolResult, Trajectory, TrajectoryGroup, Turn
from agentrl.view.run_reader import Filters, RunReader
from agentrl.view.trajectory_file import TrajectoryFile

pytestmark = pytest.mark.unit


def turn(ids, *, call: str | None = None, result: str = "", error: str | None = None, entropies=None) -> Turn:
    calls = (ToolCall("c1", call, {"expression": "1 + 1"}),) if call else ()
    results = (ToolResult("c1", result, is_error=error is not None, error_type=error),) if call else ()
    return Turn(
        completion_ids=tuple(ids),
        logprobs=tuple(-0.1 * (i + 1) for i in range(len(ids))),
        entropies=tuple(entropies or [0.5] * len(ids)),
        text="",
        tool_calls=calls,
        tool_results=results,
        observation_ids=(7, 8) if call else (),
    )


def trajectory(tid: str, reward: float | None, turns, *, stop=StopReason.ANSWERED, parent=None, branch=None, **kw):
    group = tid.rsplit("/", 1)[0]
    return Trajectory(
        task_id=group.split("/", 1)[1],
        group_id=group,
        trajectory_id=tid,
        prompt_ids=(1, 2, 3),
        turns=tuple(turns),
        stop_reason=stop,
        messages=({"role": "user", "content": kw.pop("prompt", "Compute 1 + 1.")},),
        reward=reward,
        reward_components={"exact_match": reward} if reward is not None else {},
        parent_id=parent,
        branch_turn=branch,
        **kw,
    )


def groups() -> list[TrajectoryGroup]:
    code = Task("code/1", "Compute 1 + 1.", "2", scaffold="code")
    search = Task("search/1", "Capital of Quell?", "Mira", scaffold="search")
    return [
        TrajectoryGroup(
            code,
            (
                trajectory("s1/code/1/0", 1.0, [turn([5, 6], call="calculate", result="2"), turn([9])]),
                trajectory("s1/code/1/1", 0.0, [turn([5, 6], call="calculate", result="boom", error="failed")]),
            ),
        ),
        TrajectoryGroup(
            search,
            (
                trajectory("s1/search/1/0", None, [], stop=StopReason.INFRA_ERROR, error="sandbox died"),
                trajectory("s1/search/1/1", 0.5, [turn([201, 202])], prompt="Who rules Quell?"),
            ),
        ),
    ]


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    (tmp_path / "metrics.jsonl").write_text(
        json.dumps({"step": 1, "wall_s": 1.0, "reward/mean": 0.5, "train/sampler_logprob_abs_diff": float("nan")})
        + "\n"
    )
    (tmp_path / "config.toml").write_text('scaffold = "code+search"\nname = "demo"\n')
    write_trajectories(tmp_path, "step_000001.jsonl", groups())
    return tmp_path


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_lines_are_read_alone_by_their_byte_offsets_and_summarised_from_their_head(run_dir):
    path = run_dir / "trajectories" / "step_000001.jsonl"
    file = TrajectoryFile(path)
    entries = file.refresh()
    records = lines(path)
    assert [file.read(i) for i in range(len(entries))] == records
    summaries = [e.summary for e in entries]
    assert [s["trajectory_id"] for s in summaries] == [r["trajectory_id"] for r in records]
    assert [s["scaffold"] for s in summaries] == ["code", "code", "search", "search"]
    assert [s["turns"] for s in summaries] == [len(r["turns"]) for r in records]
    assert [s["tool_errors"] for s in summaries] == [0, 1, 0, 0]
    assert summaries[2]["stop_reason"] == "infra_error" and summaries[2]["error"] == "sandbox died"


def test_a_growing_file_is_indexed_on_and_a_rewritten_one_again(run_dir):
    path = run_dir / "trajectories" / "step_000001.jsonl"
    file = TrajectoryFile(path)
    assert len(file.refresh()) == 4
    extra = json.dumps({**lines(path)[0], "trajectory_id": "s1/code/1/9"})
    with path.open("a") as f:
        f.write(extra[:40])  # a line still being written is not indexed yet
    assert len(file.refresh()) == 4
    with path.open("a") as f:
        f.write(extra[40:] + "\n")
    assert [e.summary["trajectory_id"] for e in file.refresh()][-1] == "s1/code/1/9"
    write_trajectories(run_dir, "step_000001.jsonl", groups()[1:])  # a resumed run rewrites the step: shorter,
    assert [e.summary["trajectory_id"] for e in file.refresh()] == ["s1/search/1/0", "s1/search/1/1"]
    write_trajectories(run_dir, "step_000001.jsonl", groups() * 2)  # or longer, in place
    assert [e.summary["trajectory_id"] for e in file.refresh()][:3] == ["s1/code/1/0", "s1/code/1/1", "s1/search/1/0"]
    assert [file.read(i) for i in range(8)] == lines(path)


def test_filters_and_search_choose_trajectories_and_search_reads_text_not_token_ids(run_dir):
    reader = RunReader(run_dir)
    name = "step_000001.jsonl"

    def ids(**filters):
        page = reader.groups(name, Filters(**filters))
        return [t["trajectory_id"] for g in page["groups"] for t in g["trajectories"]]

    assert len(ids()) == 4
    assert ids(scaffold="search") == ["s1/search/1/0", "s1/search/1/1"]
    assert ids(stop_reason="infra_error") == ["s1/search/1/0"]
    assert ids(reward_min=0.5) == ["s1/code/1/0", "s1/search/1/1"]
    assert ids(reward_max=0.0) == ["s1/code/1/1"]  # the unscored infra failure has no reward to bound
    assert ids(query="QUELL") == ["s1/search/1/1"]  # case aside
    assert ids(query="boom") == ["s1/code/1/1"]  # a tool result's text
    assert ids(query="201") == []  # a token id of that trajectory, not its text
    page = reader.groups(name, Filters(), offset=1, limit=1)
    assert [g["group_id"] for g in page["groups"]] == ["s1/search/1"] and page["groups_matching"] == 2


def test_names_and_links_that_lead_out_of_the_run_are_refused(run_dir, tmp_path_factory):
    reader = RunReader(run_dir)
    outside = tmp_path_factory.mktemp("outside") / "secret.jsonl"
    outside.write_text((run_dir / "trajectories" / "step_000001.jsonl").read_text())
    os.symlink(outside, run_dir / "trajectories" / "step_000009.jsonl")
    for name in ("../config.toml", "../../etc/passwd", "/etc/passwd", "step_1.jsonl/../../x", "metrics.jsonl"):
        with pytest.raises(InputError, match="not a trajectory file"):
            reader.groups(name, Filters())
    with pytest.raises(InputError, match="outside the run directory"):
        reader.groups("step_000009.jsonl", Filters())
    with pytest.raises(InputError, match="outside the run directory"):
        reader.trajectory("step_000009.jsonl", 0)
    assert "step_000009.jsonl" in reader.trajectory_files()  # listed by name, refused when opened


def test_the_overview_carries_the_curves_with_nan_as_none_and_each_steps_files(run_dir):
    write_trajectories(run_dir, "eval_step_000001.jsonl", groups()[:1])
    overview = RunReader(run_dir).overview()
    assert overview["name"] == "demo"
    step = overview["steps"][0]
    assert step["reward"] == 0.5 and step["logprob_gap"] is None
    assert (step["train_file"], step["eval_file"]) == ("step_000001.jsonl", "eval_step_000001.jsonl")


def test_the_writer_records_each_turns_advantage_training_and_learner_logprobs(tmp_path):
    import torch

    written = groups()
    first = written[0].trajectories[0]  # two turns; its token layout: prompt 3, turn 0: 2 + 2 observed, turn 1: 1
    sample = trajectory_sample(first, [0.75, -0.25], trained=[True, False])
    learner_T1 = torch.arange(len(first.token_ids) - 1, dtype=torch.float32) / -10
    credit = TurnCredit.of([sample], {0: learner_T1})
    write_trajectories(tmp_path, "step_000001.jsonl", written, credit)
    records = {r["trajectory_id"]: r for r in lines(tmp_path / "trajectories" / "step_000001.jsonl")}
    turns = records[first.trajectory_id]["turns"]
    assert [(t["advantage"], t["trained"]) for t in turns] == [(0.75, True), (-0.25, False)]
    # position p is scored by row p − 1: turn 0 samples positions 3, 4; turn 1 position 7
    assert turns[0]["learner_logprobs"] == [-0.2, -0.3] and turns[1]["learner_logprobs"] == [-0.6]
    untrained = records["s1/code/1/1"]["turns"][0]
    assert (untrained["advantage"], untrained["trained"], untrained["learner_logprobs"]) == (None, False, None)


def test_a_branch_tree_places_forks_under_their_parents_with_the_entropy_that_forked_them(tmp_path):
    parent_turns = [
        turn([5, 6], call="calculate", result="2", entropies=[0.2, 0.4]),
        turn([5, 6], call="calculate", result="2", entropies=[1.0, 2.0]),
        turn([9]),
    ]
    task = Task("code/1", "Compute 1 + 1.", "2", scaffold="code")
    members = (
        trajectory("s1/code/1/0", 1.0, parent_turns),
        trajectory("s1/code/1/1", 0.0, parent_turns[:2] + [turn([4])], parent="s1/code/1/0", branch=2),
        trajectory("s1/code/1/2", 1.0, [turn([9])]),
    )
    write_trajectories(tmp_path, "step_000001.jsonl", [TrajectoryGroup(task, members)])
    (tmp_path / "config.toml").write_text("[rollout]\nbranch_entropy_tokens = 1\n")
    tree = RunReader(tmp_path).tree("step_000001.jsonl", "s1/code/1")
    roots = tree["roots"]
    assert [r["trajectory_id"] for r in roots] == ["s1/code/1/0", "s1/code/1/2"]
    (fork,) = roots[0]["children"]
    assert fork["trajectory_id"] == "s1/code/1/1"
    # no tokenizer in this run directory: entropies are not divided by ln|V|
    entropy = segment_entropy([1.0, 2.0], 1)
    assert fork["fork"] == {"turn": 2, "entropy": entropy, "delta_entropy": entropy - segment_entropy([0.2], 1)}
