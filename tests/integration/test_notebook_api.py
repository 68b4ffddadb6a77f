"""The Python API as a notebook uses it: parts given as objects, `run()` inside a running event loop (as in
Jupyter), `await trainer.arun()` leaving the caller's loop free, and a cancelled run stopping checkpointed."""

import asyncio
import json
import tomllib

import pytest
from agentrl.rewards.outcome import exact_match

from agentrl import tool
from agentrl.errors import ConfigError, InputError
from agentrl.trainer import Trainer

pytestmark = pytest.mark.integration

SMALL = [
    "rollout.prompts_per_step=2",
    "rollout.samples_per_prompt=2",
    "rollout.max_turns=2",
    "eval.max_tasks=2",
    "eval.every_steps=0",
    "progress=false",
    "tensorboard=false",
]


@tool
def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression.

    Args:
        expression: Arithmetic such as "12 * (3 + 4)".
    """
    from agentrl.scaffolds.code.tools import evaluate, format_number

    return format_number(evaluate(expression))


TASKS = [
    {"prompt": f"What is {a} * 7?", "answer": a * 7, "split": "test" if a % 4 == 0 else "train"} for a in range(10, 22)
]


def _trainer(tmp_path, *extra, **parts):
    return Trainer([*SMALL, *extra, f"output_dir={tmp_path}", "name=run"], **parts)


def test_objects_in_a_running_loop(tmp_path):
    """`run()` called from code already inside an event loop, with a tool function, dict tasks and a reward object."""
    trainer = _trainer(tmp_path, "trainer.steps=1", tools=[calculate], tasks=TASKS, rewards=[exact_match])
    assert [t.prompt for t in trainer.train_tasks][:1] == ["What is 10 * 7?"]
    assert trainer.rewards.names == ["exact_match"]

    async def notebook_cell():
        return trainer.run()  # a plain call, as a notebook cell makes it, while the kernel's loop runs

    last = asyncio.run(notebook_cell())
    assert "train/loss" in last or "train/skipped" in last
    saved = tomllib.loads((tmp_path / "run" / "config.toml").read_text())
    assert saved["scaffold"] == "react"
    assert saved["tools"] == [f"{__name__}:calculate"]  # importable: the run can be resumed from the command line
    assert (tmp_path / "run" / "checkpoints" / "step_000001").exists()


def test_the_default_backend_on_a_cpu_needs_no_importance_correction(tmp_path):
    """`policy.backend=auto` resolves to the in-process sampler here, which shares the learner's fp32 weights: no
    truncated importance sampling, whose weights would only add the engines' rounding noise."""
    trainer = _trainer(tmp_path, "trainer.steps=1", tools=[calculate], tasks=TASKS, rewards=[exact_match])
    assert trainer.config.policy.backend == "auto" and trainer.learner.tis_cap == 0.0


def test_arun_leaves_the_callers_loop_free_and_cancelling_stops_checkpointed(tmp_path):
    trainer = _trainer(tmp_path, "trainer.steps=50", tools=[calculate], tasks=TASKS)
    ticks = []

    async def main():
        run = asyncio.ensure_future(trainer.arun())
        metrics = tmp_path / "run" / "metrics.jsonl"
        logged = 0
        while logged < 3:  # the loop keeps turning while the run trains
            logged = len(metrics.read_text().splitlines()) if metrics.exists() else 0
            ticks.append(logged)
            await asyncio.sleep(0.01)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run

    asyncio.run(main())
    assert {1, 2} <= set(ticks)  # turns of the caller's loop between steps 1 and 3
    steps = [json.loads(line)["step"] for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert 1 <= max(steps) < 50
    checkpoints = sorted(p.name for p in (tmp_path / "run" / "checkpoints").iterdir())
    assert checkpoints[-1] == f"step_{max(steps):06d}"  # stopped after a step, and saved it

    resumed = Trainer.from_run_dir(
        tmp_path / "run", ["trainer.steps=" + str(max(steps) + 1)], tools=[calculate], tasks=TASKS
    )
    assert resumed.state.step == max(steps)
    resumed.run()
    assert resumed.state.step == max(steps) + 1


def test_a_scaffold_object_samples_with_the_runs_rollout_settings(tmp_path):
    from agentrl.scaffolds.code import CodeScaffold

    mine = CodeScaffold()
    trainer = _trainer(tmp_path, "trainer.steps=1", "rollout.temperature=0.7", scaffold=mine)
    assert trainer.scaffold.rollout.temperature == 0.7 and trainer.eval_scaffold.rollout.temperature == 1.0
    assert mine.rollout.temperature != 0.7  # the object given is left as it was
    trainer.run()
    saved = tomllib.loads((tmp_path / "run" / "config.toml").read_text())
    assert saved["scaffold"] == "agentrl.scaffolds.code:CodeScaffold"


def test_parts_that_do_not_fit_fail_in_one_line(tmp_path):
    with pytest.raises(ConfigError, match="react scaffold"):
        Trainer([*SMALL, "scaffold=swe", f"output_dir={tmp_path}"], tools=[calculate], tasks=TASKS)
    with pytest.raises(InputError, match="neither a Task nor a dict"):
        Trainer([*SMALL, f"output_dir={tmp_path}"], tools=[calculate], tasks=[42])
