"""Two real training steps on the search scaffold with turn-level credit: IGPO over information-gain turn rewards,
the AEPO loss and truncated importance sampling, through the Trainer API on the shipped tiny policy."""

import json
import math

import pytest

from agentrl.config import load_config
from agentrl.trainer import Trainer

pytestmark = pytest.mark.slow

OVERRIDES = [
    "scaffold=search",
    "rewards=exact_match,info_gain",
    "trainer.credit=igpo",
    "trainer.loss=aepo",
    "trainer.tis_cap=2.0",
    "trainer.steps=2",
    "trainer.skip_zero_advantage_groups=false",
    "rollout.prompts_per_step=2",
    "rollout.samples_per_prompt=4",
    "rollout.max_turns=3",
    "eval.every_steps=2",
    "eval.max_tasks=4",
    "checkpoint_every_steps=100",
    "progress=false",
    "tensorboard=false",
]


def test_igpo_info_gain_aepo_tis_run_logs_credit_and_reward_costs(tmp_path):
    trainer = Trainer(load_config(None, OVERRIDES), tmp_path)
    trainer.run()
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in lines if "train/loss" in m]
    assert [m["step"] for m in steps] == [1, 2]
    for m in steps:
        assert math.isfinite(m["train/loss"])
        assert m["credit/igpo_outcome_only"] == 0.0  # turn rewards reached the credit assigner
        assert m["credit/igpo_turn_reward_fraction"] > 0
        assert "reward/exact_match" in m and "reward/turn/info_gain" in m
        # what each reward cost this step: seconds, and for the probe its rows and the policy's forward passes
        assert m["reward_cost/exact_match/seconds"] >= 0 and m["reward_cost/info_gain/seconds"] > 0
        assert m["reward_cost/info_gain/probes"] > 0 and m["reward_cost/info_gain/policy_forwards"] >= 1
        assert m["reward_cost/exact_match/policy_forwards"] == 0
        assert m["train/tis_weight"] > 0
    assert any(m.get("eval/success") is not None for m in lines if m["step"] == 2)
    gains = [
        turn["reward_components"]["info_gain"]
        for path in sorted((tmp_path / "trajectories").glob("step_*.jsonl"))
        for line in path.read_text().splitlines()
        for turn in json.loads(line)["turns"]
        if "info_gain" in turn["reward_components"]
    ]
    assert gains and any(abs(g) > 1e-6 for g in gains)
