"""metrics.jsonl logging and resume, plots, the progress display and the run report."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import pytest

from agentrl.runlog.metrics import MetricsLogger
from agentrl.runlog.metrics_file import read_metrics
from agentrl.runlog.plots import compare_runs, plot_run
from agentrl.runlog.progress import TrainProgress
from agentrl.runlog.report import report

pytestmark = pytest.mark.unit

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def lines(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def write_synthetic_run(run_dir: Path, steps: int = 12) -> None:
    """A run that evaluates every 4 steps on two scaffolds; best held-out success 0.875 at step 8."""
    run_dir.mkdir(parents=True, exist_ok=True)
    evals = {0: 0.25, 4: 0.5, 8: 0.875, 12: 0.75}
    with (run_dir / "metrics.jsonl").open("w") as f:
        for step in range(steps + 1):
            record: dict[str, float] = {"step": step, "wall_s": 30.0 * step}
            if step:
                record.update({"reward/mean": 0.05 * step, "success/mean": 0.04 * step, "time/step_s": 30.0})
            if step in evals:
                record.update(
                    {
                        "eval/success": evals[step],
                        "eval/success/code": evals[step] - 0.1,
                        "eval/success/search": evals[step] + 0.1,
                    }
                )
            f.write(json.dumps(record) + "\n")


def assert_png(path: Path) -> None:
    data = path.read_bytes()
    assert len(data) > 1000
    assert data.startswith(PNG_SIGNATURE)


# --- MetricsLogger ------------------------------------------------------------------------------------


def test_logger_writes_one_flushed_line_per_call_and_skips_none(tmp_path: Path) -> None:
    logger = MetricsLogger(tmp_path, tensorboard=False)
    logger.log(1, {"reward/mean": 0.5, "success/mean": None, "tool_calls/mean": 2})
    # Readable before close: a killed run keeps everything it logged.
    assert lines(tmp_path) == [
        {"step": 1, "wall_s": pytest.approx(0.0, abs=1.0), "reward/mean": 0.5, "tool_calls/mean": 2}
    ]
    logger.log(2, {"reward/mean": 0.75})
    logger.close()
    assert [r["step"] for r in lines(tmp_path)] == [1, 2]
    assert lines(tmp_path)[1]["wall_s"] >= lines(tmp_path)[0]["wall_s"]


def test_resume_appends_and_wall_time_continues(tmp_path: Path) -> None:
    with MetricsLogger(tmp_path, tensorboard=False) as logger:
        logger.wall_offset_s = 100.0  # as if the first session had trained for 100 s
        logger.log(1, {"reward/mean": 0.1})
        logger.log(2, {"reward/mean": 0.2})
    first_wall = lines(tmp_path)[-1]["wall_s"]
    assert first_wall >= 100.0

    with MetricsLogger(tmp_path, tensorboard=False) as resumed:
        assert resumed.resumed
        time.sleep(0.05)
        resumed.log(3, {"reward/mean": 0.3})
    records = lines(tmp_path)
    assert [r["step"] for r in records] == [1, 2, 3]
    assert first_wall + 0.05 <= records[-1]["wall_s"] < first_wall + 5.0


def test_resumed_logger_replaces_steps_logged_after_the_checkpoint(tmp_path: Path) -> None:
    # Killed after logging step 3 with its last checkpoint at step 2: the resumed run logs step 3 again.
    with MetricsLogger(tmp_path, tensorboard=False) as logger:
        for step in (1, 2, 3):
            logger.log(step, {"reward/mean": 0.9})
    with MetricsLogger(tmp_path, tensorboard=False) as resumed:
        resumed.log(3, {"reward/mean": 0.3})
        resumed.log(4, {"reward/mean": 0.4})
    records = lines(tmp_path)
    assert [(r["step"], r["reward/mean"]) for r in records] == [(1, 0.9), (2, 0.9), (3, 0.3), (4, 0.4)]
    walls = [r["wall_s"] for r in records]
    assert walls == sorted(walls)


def test_truncated_last_line_is_tolerated_and_cut_before_appending(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "wall_s": 10.0, "reward/mean": 0.1}\n{"step": 2, "wall_s": 2')
    assert [r["step"] for r in read_metrics(tmp_path)] == [1]

    with MetricsLogger(tmp_path, tensorboard=False) as logger:
        logger.log(2, {"reward/mean": 0.2})
    records = read_metrics(tmp_path)
    assert [r["step"] for r in records] == [1, 2]
    assert records[1]["wall_s"] >= 10.0
    assert all(json.loads(line) for line in path.read_text().splitlines())


def test_replayed_steps_supersede_what_a_killed_run_logged(tmp_path: Path) -> None:
    # Logged steps 1-3, checkpointed at 2, killed; the resumed run replays step 3 and goes on.
    rows = [(1, 0.1), (2, 0.2), (3, 0.9), (3, 0.3), (4, 0.4)]
    (tmp_path / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": s, "wall_s": float(i), "reward/mean": r}) + "\n" for i, (s, r) in enumerate(rows))
    )
    assert [(r["step"], r["reward/mean"]) for r in read_metrics(tmp_path)] == [(1, 0.1), (2, 0.2), (3, 0.3), (4, 0.4)]


def test_rewind_drops_steps_past_the_replay_point(tmp_path: Path) -> None:
    steps = [0, 1, 2, 3, 1]
    (tmp_path / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": s, "wall_s": float(i)}) + "\n" for i, s in enumerate(steps))
    )
    assert [r["step"] for r in read_metrics(tmp_path)] == [0, 1]


def test_tensorboard_scalars_are_written(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    with MetricsLogger(tmp_path) as logger:
        logger.log(1, {"reward/mean": 0.5})
    assert list((tmp_path / "tensorboard").glob("events.out.tfevents.*"))


# --- plots and report ---------------------------------------------------------------------------------


def test_plot_run_writes_png_files(tmp_path: Path) -> None:
    write_synthetic_run(tmp_path)
    paths = plot_run(tmp_path)
    assert [p.name for p in paths] == ["reward.png", "heldout_success.png"]
    for path in paths:
        assert path.parent == tmp_path / "plots"
        assert_png(path)


def test_plot_run_skips_plots_without_data(tmp_path: Path) -> None:
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "wall_s": 3.0, "reward/mean": 0.2}\n')
    assert [p.name for p in plot_run(tmp_path)] == ["reward.png"]
    assert plot_run(tmp_path / "missing") == []


def test_compare_runs_draws_every_run(tmp_path: Path) -> None:
    write_synthetic_run(tmp_path / "a")
    write_synthetic_run(tmp_path / "b", steps=8)
    out = compare_runs([tmp_path / "a", tmp_path / "b"], tmp_path / "cmp" / "success.png")
    assert_png(out)
    with pytest.raises(ValueError, match="no_such_key"):
        compare_runs([tmp_path / "a"], tmp_path / "x.png", key="no_such_key")


def test_report_summarises_the_run_and_draws_plots(tmp_path: Path) -> None:
    write_synthetic_run(tmp_path)
    text = report(tmp_path)
    assert "0.875 (step 8)" in text  # best held-out success
    assert "0.250 (step 0)" in text and "0.750 (step 12)" in text
    assert "12" in text and "6m 00s" in text  # steps, wall time
    assert "heldout_success.png" in text and "reward.png" in text
    assert "\x1b[" not in text
    assert_png(tmp_path / "plots" / "heldout_success.png")


def test_report_of_an_empty_run_and_of_a_missing_one(tmp_path: Path) -> None:
    (tmp_path / "metrics.jsonl").write_text("")
    assert "none logged yet" in report(tmp_path)
    with pytest.raises(FileNotFoundError):
        report(tmp_path / "missing")


# --- progress -----------------------------------------------------------------------------------------


def test_disabled_progress_prints_compact_lines(capsys: pytest.CaptureFixture[str]) -> None:
    with TrainProgress(60, enabled=False, start_step=2) as progress:
        progress.advance(
            3,
            {
                "reward/mean": 0.41,
                "success/mean": 0.41,
                "tool_calls/mean": 1.6,
                "rollout/tokens_per_s": 2311.2,
                "eval/success": 0.52,
            },
        )
        progress.advance(4, {"reward/mean": 0.5})
        progress.log("checkpoint saved")
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "step 3/60 reward 0.41 success 0.41 tools 1.6 tok/s 2311 eval 0.52",
        "step 4/60 reward 0.50 eval 0.52",  # the latest held-out success stays on display
        "checkpoint saved",
    ]


def test_progress_without_a_terminal_falls_back_to_lines(capsys: pytest.CaptureFixture[str]) -> None:
    with TrainProgress(5) as progress:  # pytest captures stdout, so it is not a terminal
        assert not progress.live
        progress.advance(1, {})
    assert capsys.readouterr().out == "step 1/5\n"


def test_live_bar_on_a_terminal() -> None:
    from rich.console import Console

    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=160)
    with TrainProgress(10, console=console) as progress:
        assert progress.live
        progress.advance(1, {"reward/mean": 0.25, "eval/success": 0.5})
        progress.log("evaluating [step 1]")
    text = buffer.getvalue()
    assert "evaluating [step 1]" in text
    assert "reward 0.25" in text and "eval 0.50" in text
    assert "1/10" in text


def test_episodes_past_the_context_window_are_counted() -> None:
    from transformers import AutoModelForCausalLM

    from agentrl.policy import context_window, past_context_warning, resolve_model_path
    from agentrl.runlog.step_stats import rollout_metrics
    from agentrl.types import StopReason, Task, Trajectory, TrajectoryGroup, Turn

    def episode(tid: str, sampled: int, stop: StopReason = StopReason.ANSWERED) -> Trajectory:
        turn = Turn(tuple(range(sampled)), (0.0,) * sampled, (0.0,) * sampled, "")
        return Trajectory("t", "g", tid, (0,) * 100, (turn,), stop, reward=0.0)

    model = AutoModelForCausalLM.from_pretrained(resolve_model_path("tiny"))
    window = context_window(model)
    assert window == model.config.max_position_embeddings == 1024
    assert context_window(object()) is None
    assert past_context_warning(1024, window) is None and past_context_warning(4096, None) is None
    assert "exceeds the model's context window (1024 positions)" in past_context_warning(1025, window)
    group = TrajectoryGroup(
        Task("t", "?"),
        (episode("a", 900), episode("b", 924), episode("c", 925), episode("d", 5000, StopReason.INFRA_ERROR)),
    )
    metrics = rollout_metrics([group], "outcome", window)
    assert metrics["tokens/past_context"] == pytest.approx(1 / 3)  # 1025 tokens; the infra failure is not counted
    assert "tokens/past_context" not in rollout_metrics([group], "outcome")


def test_step_ticks_are_whole_and_equal_reward_and_success_stay_apart(tmp_path: Path) -> None:
    from agentrl.runlog.plots import _draw_train

    records = [{"step": k, "wall_s": 2.0 * k, "reward/mean": 0.25 * k, "success/mean": 0.25 * k} for k in (1, 2, 3)]
    figure = _draw_train(records, "run")
    figure.canvas.draw()
    (ax,) = figure.axes
    ticks = [t for t in ax.get_xticks() if 1 <= t <= 3]
    assert ticks and all(float(t).is_integer() for t in ticks)  # no tick at 1.25 of a step
    reward, success = ax.get_lines()
    assert list(reward.get_ydata()) == list(success.get_ydata())  # the same values...
    assert reward.get_linestyle() != success.get_linestyle() and success.get_markerfacecolor() == "none"


def test_a_reward_that_failed_reads_failed_not_zero(capsys: pytest.CaptureFixture[str]) -> None:
    with TrainProgress(3, enabled=False) as progress:
        progress.advance(1, {"reward/mean": 0.0, "success/mean": 0.0, "reward/failed": 1.0})
    assert capsys.readouterr().out.splitlines() == ["step 1/3 reward FAILED success 0.00"]
