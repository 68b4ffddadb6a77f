"""Rewards for SWE episodes.

- `swe_resolved` (the default): 1 when the hidden FAIL_TO_PASS and PASS_TO_PASS tests all pass with the
  submitted patch, else 0 (the SWE-bench "resolved" verdict).
- `swe_similarity`: SWE-RL's execution-free reward, the patch's similarity to the gold patch in [0, 1], −1 when
  the patch does not parse (see `patches.similarity`).

Both read what `SweScaffold.finish_episode` measured (`Trajectory.measurements`: `swe/resolved`,
`swe/similarity`); a trajectory without
those (a scaffold run with `grade_in_episode=False`) is graded here from its answer, the patch. A grade the
infrastructure spoiled abstains (None) rather than scoring 0. Dense step rewards are gated on the outcome with
the G-RA filter: `reward_filters=["gra_gate"]` (see `agentrl.rewards.combinators.GRAGate`).
"""

from __future__ import annotations

from agentrl.scaffolds.swe import patches

from agentrl.reward import reward
from agentrl.types import Task, Trajectory


@reward
async def swe_resolved(task: Task, trajectory: Trajectory) -> float | None:
    value = trajectory.measurements.get("swe/resolved")
    if value is not None:
        return value
    if "swe" not in task.metadata or trajectory.answer is None:
        return None
    from agentrl.scaffolds.swe.grading import grade
    from agentrl.scaffolds.swe.instances import SweInstance

    outcome = await grade(SweInstance.from_task(task), trajectory.answer, task.metadata["repos_dir"])
    return None if outcome.infra_failure else float(outcome.resolved)


@reward
def swe_similarity(task: Task, trajectory: Trajectory) -> float | None:
    value = trajectory.measurements.get("swe/similarity")
    if value is not None:
        return value
    if "swe" not in task.metadata or trajectory.answer is None:
        return None
    return patches.similarity(trajectory.answer, task.metadata["swe"]["patch"])
