"""The eval results file: resume semantics, infrastructure failures, the summary."""

import dataclasses
import json
import re

import pytest

from agentrl.eval.results import EvalRecord, ResultsStore, token_counts
from agentrl.eval.summary import summarize, table
from agentrl.types import StopReason, Trajectory, Turn

pytestmark = pytest.mark.unit


def record(task: str, sample: int, success: bool, stop: str = "answered", latency: float = 1.0) -> EvalRecord:
    return EvalRecord(task, sample, success, float(success), stop, 2, 1, 100, 10, latency)


def test_latest_record_wins_and_infra_failures_are_not_finished(tmp_path):
    store = ResultsStore(tmp_path / "r.jsonl")
    store.append(record("a", 0, False, stop=StopReason.INFRA_ERROR.value))
    store.append(record("b", 0, True))
    assert store.finished() == {("b", 0)}
    store.append(record("a", 0, True))
    assert store.finished() == {("a", 0), ("b", 0)} and len(store.load()) == 2


def test_a_truncated_last_line_is_skipped_and_not_glued_to_the_next(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(record("a", 0, True).__dict__) + "\n" + '{"task_id": "b", "sam')
    store = ResultsStore(path)
    assert [r.task_id for r in store.load()] == ["a"]
    store.append(record("c", 0, False))
    assert [r.task_id for r in ResultsStore(path).load()] == ["a", "c"]


def test_summary_scores_only_finished_episodes():
    records = [
        record("a", 0, True),
        record("a", 1, False),
        record("b", 0, False),
        record("b", 1, False),
        record("c", 0, True, stop=StopReason.INFRA_ERROR.value),
    ]
    s = summarize(records, wall_s=30.0, episodes_run=5)
    assert s["tasks"] == 2 and s["episodes"] == 4 and s["infra_errors"] == 1
    assert s["pass@1"] == pytest.approx(0.25) and s["pass@2"] == pytest.approx(0.5)
    assert s["episodes_per_min"] == pytest.approx(10.0)
    assert "pass@2" in table(s, "t")


def test_summary_lists_every_scaffold_with_its_infra_failures():
    def of(scaffold: str, task: str, success: bool, stop: str = "answered") -> EvalRecord:
        return dataclasses.replace(record(task, 0, success, stop=stop), scaffold=scaffold)

    infra = StopReason.INFRA_ERROR.value
    records = [of("code", "c1", True), of("code", "c2", False), of("search", "s1", False, infra)]
    records.append(of("search", "s2", True, infra))  # a failed episode's success never counts
    s = summarize(records)
    assert s["success"] == 0.5 and s["pass@1"] == 0.5 and s["episodes"] == 2 and s["infra_errors"] == 2
    assert s["success/code"] == 0.5 and s["episodes/code"] == 2 and s["infra_errors/code"] == 0
    assert s["success/search"] is None and s["episodes/search"] == 0 and s["infra_errors/search"] == 2
    assert re.search(r"\n  success/search +-\n", table(s, "t"))
    assert "success/code" not in summarize(records[:2])  # one scaffold: no breakdown


def test_summary_without_a_finished_episode_shows_no_success():
    s = summarize([record("a", 0, True, stop=StopReason.INFRA_ERROR.value)])
    assert s["episodes"] == 0 and s["infra_errors"] == 1 and s["success"] is None and s["turns"] is None
    assert not any(k.startswith("pass@") for k in s)
    assert re.search(r"\n  infra_errors +1\n  success +-\n", table(s, "t"))


def test_token_counts_bill_the_context_of_every_turn():
    turns = (Turn((5, 6), (0.0, 0.0), (0.0, 0.0), "x", observation_ids=(7, 8, 9)), Turn((10,), (0.0,), (0.0,), "y"))
    t = Trajectory("t", "g", "t/0", (1, 2, 3), turns, StopReason.ANSWERED)
    assert token_counts(t) == (3 + 8, 3)


def test_results_resume_only_under_the_settings_that_made_them(tmp_path):
    from agentrl.errors import ConfigError

    path = tmp_path / "r.jsonl"
    store = ResultsStore(path)
    greedy = {"model": "tiny", "temperature": 0.0, "tiers": ("easy",)}
    store.claim(greedy)
    store.append(record("a", 0, True))
    ResultsStore(path).claim(dict(greedy))  # the same settings: resumed
    assert ResultsStore(path).finished() == {("a", 0)}
    with pytest.raises(ConfigError, match=r"temperature 0.0 there, 1.0 now.*--overwrite.*--output"):
        ResultsStore(path).claim({**greedy, "temperature": 1.0})
    assert ResultsStore(path).finished() == {("a", 0)}  # refused: nothing changed
    ResultsStore(path).claim({**greedy, "temperature": 1.0}, overwrite=True)
    assert ResultsStore(path).load() == [] and json.loads(store.settings_path.read_text())["temperature"] == 1.0
    store.append(record("b", 0, True))
    store.settings_path.unlink()  # results from before settings were recorded
    with pytest.raises(ConfigError, match="unrecorded settings"):
        ResultsStore(path).claim(greedy)
