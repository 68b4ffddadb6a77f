"""`SweScaffold`: a software-engineering agent fixing an issue in a repository, graded by hidden tests.

The episode is `ReactScaffold`'s loop with the repository at its base commit in the session's sandboxed
workspace (put there by the hidden `swe_setup` tool before the first turn), the mini-swe-agent-style prompt
below, and the tools `bash`, `view`, `create_file`, `str_replace`, `find_files`, `grep`, `run_tests` and `submit`.
A `submit` call ends the episode; so does a turn without tool calls, the turn limit or the token budget. Whatever
way it ends, the submission is the workspace's `git diff` against the base commit (`Trajectory.answer`), and it
is graded at once in a fresh sandbox (`grading.grade`): the outcome lands in the trajectory's measurements
(`swe/resolved`, `swe/similarity`, `swe/patch_lines`) for the rewards to read, and a grading run the
infrastructure spoiled makes the trajectory an `INFRA_ERROR` instead of a zero.

Tasks: the bundled ones (`bundled.py`), or a SWE-bench JSONL/Parquet file with its repositories in a local
directory: `SweScaffold(tasks_file=..., repos_dir=...)`, or the `AGENTRL_SWE_TASKS` and `AGENTRL_SWE_REPOS_DIR`
environment variables when the scaffold is picked by name (`--scaffold swe`).
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import os
import uuid
from collections.abc import Sequence
from typing import Any

from agentrl.scaffolds.react import ReactScaffold
from agentrl.scaffolds.swe import patches
from agentrl.scaffolds.swe.grading import TEST_TIMEOUT_S, grade
from agentrl.scaffolds.swe.instances import SweInstance, load_instances, repository_archive_b64
from agentrl.tools.files import FileEditor
from agentrl.tools.swe import SweTools
from agentrl.tools.swe.swe_tools import HIDDEN_TOOLS
from agentrl.tools.terminal import Shell

from agentrl.config import RolloutConfig
from agentrl.errors import ConfigError, GradingError, TaskSetupError
from agentrl.protocols import Policy, ToolBackend, ToolSession
from agentrl.sandbox.config import SandboxConfig
from agentrl.types import Task, ToolCall, Trajectory

MODEL_TOOLS = ("bash", "view", "create_file", "str_replace", "find_files", "grep", "run_tests", "submit")

SYSTEM_PROMPT = """\
You are a software engineer. A Python repository is checked out at /workspace and the user describes an issue \
in it. Fix the issue by editing the source code, then call `submit`.

Work step by step, one or a few tool calls per turn:
1. Find the code involved (`grep`, `find_files`, `view`).
2. Understand the bug: read the function, and reproduce it with `bash` (e.g. `python -c ...`) when that helps.
3. Fix it with `str_replace` (or `create_file`), changing only what the fix needs.
4. Check with `run_tests` (the repository's visible tests) and `bash`.
5. Call `submit` when the fix is done. Your diff against the original repository is graded by hidden tests.

Do not edit or delete tests and do not change test configuration: the grade restores them and ignores such edits."""

_SUBMISSION: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar("swe_submission", default=None)


class SweScaffold(ReactScaffold):
    """ReAct over a repository with shell and file tools; the outcome is the hidden tests' verdict."""

    name = "swe"

    def __init__(
        self,
        *,
        rollout: RolloutConfig | None = None,
        tasks_file: str | None = None,
        repos_dir: str | None = None,
        rewards: Sequence[str] = ("swe_resolved",),
        grade_in_episode: bool = True,
        sandbox: SandboxConfig | None = None,
        test_timeout_s: float = TEST_TIMEOUT_S,
    ):
        self.tasks_file = tasks_file or os.environ.get("AGENTRL_SWE_TASKS") or None
        self._repos_dir = repos_dir or os.environ.get("AGENTRL_SWE_REPOS_DIR") or None
        if self.tasks_file and not self._repos_dir:
            raise ConfigError("SWE tasks from a file need repos_dir (or AGENTRL_SWE_REPOS_DIR): nothing is downloaded")
        self.grade_in_episode = grade_in_episode
        self.sandbox = sandbox
        self.test_timeout_s = test_timeout_s
        super().__init__(
            tools=[Shell, FileEditor, SweTools],
            tasks=self._load_tasks,
            system_prompt=SYSTEM_PROMPT,
            rewards=rewards,
            rollout=rollout,
        )

    @property
    def repos_dir(self) -> str:
        if self._repos_dir is None:
            from agentrl.scaffolds.swe import bundled

            self._repos_dir = str(bundled.repos_dir())
        return self._repos_dir

    def _load_tasks(self, split: str) -> list[Task]:
        if self.tasks_file:
            found = load_instances(self.tasks_file)
        else:
            from agentrl.scaffolds.swe import bundled

            found = bundled.instances()
        return [i.to_task(self.repos_dir) for i in found if i.split == split]

    def tool_names(self, task: Task | None = None) -> tuple[str, ...]:
        return MODEL_TOOLS

    def ends_episode(self, calls: Sequence[ToolCall]) -> bool:
        return any(c.name == "submit" for c in calls)

    def initial_messages(self, task: Task) -> list[dict[str, Any]]:
        issue = f"<issue>\n{task.prompt.strip()}\n</issue>\n\nThe repository is at /workspace. Fix the issue."
        return [{"role": "system", "content": self.system_prompt}, {"role": "user", "content": issue}]

    # --- the repository around the episode ---------------------------------------------------------------

    async def open_episode(self, task: Task, tools: ToolBackend, names: Sequence[str] | None) -> ToolSession:
        """A session whose workspace holds the repository at the base commit (the model's tools plus the hidden
        setup and diff tools, which the model is never shown)."""
        instance = SweInstance.from_task(task)
        session = await tools.open_session([*(names or MODEL_TOOLS), *HIDDEN_TOOLS])
        try:
            archive = await asyncio.to_thread(repository_archive_b64, instance, self._task_repos_dir(task))
            arguments = {"archive_b64": archive, "visible_tests": list(instance.visible_tests)}
            result = await session.call(ToolCall(_call_id("setup"), "swe_setup", arguments))
        except BaseException:
            await session.close()
            raise
        if result.is_error:
            await session.close()
            raise TaskSetupError(f"setting up {task.id} failed: {result.text}")
        return session

    async def finish_episode(self, task: Task, session: ToolSession) -> dict[str, float]:
        """Read the submission and grade it; raises `GradingError` when the diff cannot be read or the grader
        cannot run."""

        result = await session.call(ToolCall(_call_id("diff"), "swe_diff", {}))
        if result.is_error:
            raise GradingError(f"reading the workspace diff failed: {result.text}")
        patch = result.text
        if (box := _SUBMISSION.get()) is not None:
            box["patch"] = patch
        instance = SweInstance.from_task(task)
        components = {
            "swe/similarity": patches.similarity(patch, instance.patch),
            "swe/patch_lines": float(patches.changed_lines(patch)),
        }
        if self.grade_in_episode:
            outcome = await grade(
                instance, patch, self._task_repos_dir(task), sandbox=self.sandbox, test_timeout_s=self.test_timeout_s
            )
            if outcome.infra_failure:
                raise GradingError(f"grading {task.id} failed: {outcome.error}")
            components["swe/resolved"] = float(outcome.resolved)
        return components

    async def run(
        self,
        task: Task,
        policy: Policy,
        tools: ToolBackend,
        *,
        group_id: str,
        trajectory_id: str,
        seed: int | None = None,
        **episode_options: Any,
    ) -> Trajectory:
        box: dict[str, str] = {}
        # finish_episode runs inside this call, in this task's context: it leaves the submission here.
        token = _SUBMISSION.set(box)
        try:
            trajectory = await super().run(
                task, policy, tools, group_id=group_id, trajectory_id=trajectory_id, seed=seed, **episode_options
            )
        finally:
            _SUBMISSION.reset(token)
        return dataclasses.replace(trajectory, answer=box["patch"]) if "patch" in box else trajectory

    def _task_repos_dir(self, task: Task) -> str:
        return task.metadata.get("repos_dir") or self.repos_dir


def _call_id(kind: str) -> str:
    # Unique, so that no call id the model's endpoint chose can make the server replay a stored result instead.
    return f"swe_{kind}_{uuid.uuid4().hex}"
