"""The rollout bench: its virtual clock, and the engine between the ideal bound and the synchronous baseline."""

import asyncio

import pytest

from agentrl.bench.rollout_bench import SimConfig, VirtualClockLoop, bench_turns, ideal_s, synchronous_s

pytestmark = pytest.mark.unit


def test_virtual_clock_skips_sleeps_and_composes_them():
    async def main():
        await asyncio.gather(asyncio.sleep(100.0), asyncio.sleep(30.0))
        await asyncio.sleep(5.0)

    loop = VirtualClockLoop()
    try:
        loop.run_until_complete(main())
        assert loop.time() == pytest.approx(105.0)
    finally:
        loop.close()


def test_baseline_and_bound_on_hand_computed_turns():
    sim = SimConfig(step_s=1.0, row_s=0.5)
    costs = [[(2, 10.0), (1, 0.0)], [(1, 1.0), (3, 0.0)]]
    # turn 0: steps with 2 then 1 rows (2 + 1.5) + slowest tool 10; turn 1: 2 + 1.5 + 1.5, no tool
    assert synchronous_s(costs, sim) == pytest.approx(3.5 + 10 + 5.0)
    # alone: traj 0 = 3 tokens * 1.5 + 10 = 14.5; work: 4 steps of traj 1 + 7 row-tokens * 0.5 = 7.5
    assert ideal_s(costs, sim) == pytest.approx(14.5)


def test_engine_runs_the_real_scaffold_between_bound_and_baseline(tiny_tokenizer):
    row = bench_turns(3, tasks=4, samples=2, sim=SimConfig(), tokenizer=tiny_tokenizer)
    assert row["trajectories"] == 8
    assert row["ideal_s"] <= row["engine_s"] + 1e-9  # the bound holds for the real engine
    assert row["engine_s"] < row["synchronous_s"]
    assert row["sampled_tokens"] > 0 and row["decode_steps"] > 0
