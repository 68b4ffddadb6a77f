"""An LLM-judge process reward: each turn scored from the turn and the next state it led to (OpenClaw-RL).

For every turn that has a next state — the tool results that came back after it — a judge model reads the
task, the assistant's turn and that next state, and answers `\\boxed{1}` (progress: the tool returned a useful,
non-error result), `\\boxed{-1}` (an error, a wasted or wrong call) or `\\boxed{0}` (unclear). `votes` samples
(m = 3 at temperature 0.6 in OpenClaw-RL), majority of the parsable ones, ties → 0. A turn without a next state
(the final answer) abstains, unless the episode has a single turn; a judge outage abstains and is counted in
`stats`, never a 0.

Deviation from OpenClaw-RL: the next state is the tool results (agentrl episodes have no user follow-ups), and
the judge also sees the task so that "progress" has a goal.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentrl.judge import Judge, majority
from agentrl.types import Task, Trajectory, Turn

RUBRIC = """You are grading one step of an AI agent that uses tools to solve a task.

Task:
{task}

The agent's step (its message and tool calls):
{action}

What came back (the next state):
{next_state}

Did this step make progress towards solving the task? Progress means the tools returned a useful, non-error
result that moves the agent closer to the answer, or the step answered correctly. No progress means an error,
a malformed or pointless call, or a wrong answer. Think briefly, then end with exactly one of:
\\boxed{{1}} (progress), \\boxed{{-1}} (no progress or harmful), \\boxed{{0}} (unclear)."""


def render_action(turn: Turn) -> str:
    calls = "\n".join(f"call {c.name}({c.arguments})" for c in turn.tool_calls)
    return "\n".join(part for part in (turn.text.strip(), calls) if part) or "(empty)"


def render_next_state(turn: Turn, max_chars: int) -> str:
    parts = []
    for r in turn.tool_results:
        tag = f"tool error ({r.error_type})" if r.is_error else "tool result"
        parts.append(f"[{tag}] {r.text[:max_chars]}")
    return "\n".join(parts)


class JudgePRM(Judge):
    """OpenClaw-RL's next-state judge as a turn-level reward (+1 / 0 / −1)."""

    rubric = RUBRIC
    inputs = ("task", "trajectory", "turn")
    level = "turn"

    def __init__(
        self,
        model: str | None = None,
        *,
        votes: int = 3,
        temperature: float = 0.6,
        max_state_chars: int = 2000,
        **kwargs: Any,
    ):
        kwargs.setdefault("name", "judge_prm")
        super().__init__(model, votes=votes, temperature=temperature, **kwargs)
        self.max_state_chars = max_state_chars

    def fields(self, task: Task, trajectory: Trajectory, turn: Turn) -> dict[str, Any] | None:
        if turn.tool_results:
            next_state = render_next_state(turn, self.max_state_chars)
        elif len(trajectory.turns) == 1:
            next_state = f"(the episode ended; final answer: {trajectory.answer!r})"
        else:
            return None
        return {"task": task.prompt, "action": render_action(turn), "next_state": next_state}

    def parse(self, text: str) -> float | None:
        value = super().parse(text)
        return value if value in (-1.0, 0.0, 1.0) else None

    def aggregate(self, votes: Sequence[float]) -> float | None:
        return majority(votes)


judge_prm = JudgePRM()
"""The registered instance: its endpoint comes from AGENTRL_JUDGE_MODEL / AGENTRL_JUDGE_BASE_URL / _API_KEY."""
