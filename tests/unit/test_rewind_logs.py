"""Resuming rewinds the trajectory logs, training and held-out alike, to the checkpoint's step."""

import pytest

from agentrl.runlog.step_stats import rewind_logs

pytestmark = pytest.mark.unit


def test_logs_after_the_checkpoint_step_are_dropped_and_earlier_ones_kept(tmp_path):
    logs = tmp_path / "trajectories"
    logs.mkdir()
    names = [f"{kind}step_{step:06d}.jsonl" for kind in ("", "eval_") for step in (0, 2, 3, 4)]
    for name in names:
        (logs / name).write_text("{}\n")
    (logs / "step_000000.jsonl").unlink()  # training steps start at 1
    rewind_logs(tmp_path, 2)
    assert sorted(p.name for p in logs.iterdir()) == [
        "eval_step_000000.jsonl",
        "eval_step_000002.jsonl",
        "step_000002.jsonl",
    ]
