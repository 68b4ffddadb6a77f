"""scripts/compare_credit.py's report: from finished runs' metrics.jsonl to the per-seed and mean table and plot."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "compare_credit.py"


def load_script():
    spec = importlib.util.spec_from_file_location("compare_credit", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_run(run_dir: Path, heldout: dict[int, float], step_s: float, ig_s: float | None) -> None:
    run_dir.mkdir(parents=True)
    lines = []
    for step in range(max(heldout) + 1):
        record = {"step": step, "wall_s": 60.0 * step}
        if step in heldout:
            record["eval/success"] = heldout[step]
        if step > 0:
            record |= {"time/step_s": step_s, "reward_cost/exact_match/seconds": 0.01}
            record["reward_cost/exact_match/policy_forwards"] = 0.0
            if ig_s is not None:
                record |= {"reward_cost/info_gain/seconds": ig_s, "reward_cost/info_gain/policy_forwards": 2.0}
                record["reward_cost/info_gain/probes"] = 40.0
        lines.append(json.dumps(record))
    (run_dir / "metrics.jsonl").write_text("\n".join(lines) + "\n")


def test_report_only_summarises_seeds_and_means(tmp_path, capsys):
    script = load_script()
    write_run(tmp_path / "grpo_seed0", {0: 0.2, 2: 0.4}, 3.0, None)
    write_run(tmp_path / "grpo_seed1", {0: 0.2, 2: 0.6}, 5.0, None)
    write_run(tmp_path / "igpo_seed0", {0: 0.2, 2: 0.5}, 4.0, 0.5)
    write_run(tmp_path / "igpo_seed1", {0: 0.2, 2: 0.7}, 6.0, 1.5)
    assert script.main(["--out", str(tmp_path), "--seeds", "0,1", "--report-only"]) == 0
    table = json.loads((tmp_path / "compare.json").read_text())
    assert table["grpo"]["mean"]["heldout"] == {"0": 0.2, "2": pytest.approx(0.5)}
    assert table["igpo"]["mean"]["final_heldout"] == pytest.approx(0.6)
    assert table["igpo"]["mean"]["seconds_per_step"] == pytest.approx(5.0)
    assert table["igpo"]["mean"]["reward_seconds_per_step_total"] == pytest.approx(1.01)
    assert table["igpo"]["mean"]["reward_policy_forwards_per_step_total"] == 2.0
    assert table["igpo"]["seeds"]["1"]["info_gain_probes_per_step"] == 40.0
    assert table["grpo"]["mean"]["reward_policy_forwards_per_step_total"] == 0.0
    markdown = (tmp_path / "compare.md").read_text()
    assert "| igpo | mean | 0.200 | 0.600 |" in markdown
    assert (tmp_path / "heldout_success.png").stat().st_size > 0
    assert "trainer.credit=igpo" in capsys.readouterr().out  # the commands are printed even when not run
