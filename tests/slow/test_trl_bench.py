"""`agentrl bench trl`: both sides train on the same planned tasks, alternating, and the summary reports each."""

from __future__ import annotations

import math

import pytest

from agentrl.bench.trl_bench import TrlBenchConfig, run_benchmark
from agentrl.bench.trl_bench_report import SideRecord, format_table, summarize


@pytest.mark.slow
def test_two_steps_of_each_side_on_the_same_tasks():
    config = TrlBenchConfig(steps=2, prompts_per_step=2, samples_per_prompt=2, minibatches_per_step=2, seed=1)
    result = run_benchmark(config)  # raises when either side trains a step on other tasks than the plan's
    for side in ("agentrl", "trl"):
        figures = result[side]
        assert len(figures["wall_s"]) == len(figures["cpu_s"]) == len(figures["reward"]) == 2
        assert min(figures["wall_s"]) > 0 and min(figures["cpu_s"]) > 0
        assert all(0.0 <= r <= 1.0 for r in figures["reward"])
    assert result["agentrl"]["median_phase_s"]["time/step_s"] > 0  # agentrl's own timers came back
    assert result["trl"]["median_phase_s"]["generate_and_score_s"] > 0
    ratio = result["trl"]["median_wall_s"] / result["agentrl"]["median_wall_s"]
    assert math.isclose(result["trl_over_agentrl_wall"], ratio, rel_tol=0.01)
    assert "agentrl" in format_table(result) and "trl" in format_table(result)


@pytest.mark.unit
def test_summary_leaves_the_warm_up_step_out_of_the_medians():
    records = {
        "agentrl": SideRecord(wall_s=[30.0, 1.0, 2.0, 3.0], cpu_s=[9.0, 1.0, 1.0, 1.0], reward=[0.0, 0.5, 0.5, 1.0]),
        "trl": SideRecord(wall_s=[60.0, 4.0, 4.0, 5.0], cpu_s=[9.0, 2.0, 3.0, 2.0], reward=[0.0, 0.5, 0.5, 0.5]),
    }
    result = summarize(TrlBenchConfig(steps=4), records)
    assert result["agentrl"]["median_wall_s"] == 2.0 and result["trl"]["median_wall_s"] == 4.0
    assert result["trl_over_agentrl_wall"] == 2.0 and result["trl_over_agentrl_cpu"] == 2.0
    assert result["agentrl"]["mean_reward_last_half"] == 0.75 and result["trl"]["mean_reward_last_half"] == 0.5
    assert result["meets_target"]
    records["agentrl"].reward[-1] = 0.0  # faster, but a worse reward: the target is not met
    assert not summarize(TrlBenchConfig(steps=4), records)["meets_target"]


@pytest.mark.unit
def test_equal_reward_means_a_difference_within_the_noise_of_the_last_half():
    records = {
        "agentrl": SideRecord(wall_s=[9.0, 1.0, 1.0, 1.0], cpu_s=[9.0, 1.0, 1.0, 1.0], reward=[0.0, 0.5, 0.5, 0.47]),
        "trl": SideRecord(wall_s=[9.0, 3.0, 3.0, 3.0], cpu_s=[9.0, 3.0, 3.0, 3.0], reward=[0.0, 0.5, 0.5, 0.53]),
    }
    result = summarize(TrlBenchConfig(steps=4), records)  # 2 steps × 32 trajectories a side in the last half
    assert result["reward_difference"] == -0.03
    assert result["reward_noise_2se"] == pytest.approx(2 * (0.5 * 0.5 * 2 / 64) ** 0.5, abs=1e-3)
    assert result["reward_not_worse"] and result["meets_target"]  # 2 trajectories in 64: noise, not a worse policy
    records["agentrl"].reward[-2:] = [0.3, 0.3]  # 14 in 64 fewer: beyond it
    assert not summarize(TrlBenchConfig(steps=4), records)["reward_not_worse"]
