"""The vocabulary of agentrl: frozen records that flow from rollout to learner.

A `Task` goes into a scaffold; the scaffold talks to a policy and a tool server and returns a `Trajectory`
made of `Turn`s; trajectories of one task in one step form a `TrajectoryGroup`, the unit of group-relative
advantages. Records are frozen: later phases add rewards with `dataclasses.replace`, never by mutation.

Token-exact rule: a trajectory's `token_ids` are the prompt ids, then for each turn the ids the policy sampled
followed by the ids of the observation appended after it (tool results, the next generation prompt). Nothing is
ever re-tokenized from text, so the learner scores exactly the tokens the sampler produced.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Literal


class StopReason(enum.StrEnum):
    """Why an episode ended."""

    ANSWERED = "answered"
    """The policy produced a final answer (a turn without tool calls)."""
    MAX_TURNS = "max_turns"
    """The turn limit was reached."""
    MAX_TOKENS = "max_tokens"
    """The token budget of the episode (or of one turn) ran out."""
    PARSE_ERRORS = "parse_errors"
    """Too many consecutive malformed tool calls."""
    TOOL_FAILURE = "tool_failure"
    """A tool failure the scaffold declares fatal ended the episode."""
    INFRA_ERROR = "infra_error"
    """The infrastructure failed (tool server unreachable, sandbox died): not the policy's fault. Such
    trajectories are excluded from group statistics and never scored as zero-reward samples."""


ErrorType = Literal["not_found", "bad_arguments", "timeout", "failed", "sandbox_error", "parse_error", "forbidden"]


@dataclass(frozen=True)
class Task:
    """One problem for a scaffold."""

    id: str
    """Stable identifier, unique within its task set."""
    prompt: str
    """The user message that opens the episode."""
    answer: str | None = None
    """Ground-truth answer, when the task has one."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Anything else the scaffold or rewards need (tests, repository, tier, tool names, ...)."""
    split: str = "train"
    """`train` or `test` (held out)."""
    scaffold: str | None = None
    """The scaffold that owns the task, when several are mixed."""
    messages: tuple[dict[str, Any], ...] = ()
    """The chat messages that open the episode, when the task brings its own (OpenAI-style system, user,
    assistant and tool messages: a system prompt, few-shot turns); `prompt` is then the text of their last user
    message. Empty: the scaffold's system prompt, then `prompt` as the user message."""


@dataclass(frozen=True)
class ToolCall:
    """A call the policy asked for."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ToolResult:
    """What a tool returned. Failures are results too: `is_error` with a typed `error_type`."""

    call_id: str
    content: str | list[dict[str, Any]]
    """Text, or a list of OpenAI-style content parts (`{"type": "text", ...}`, `{"type": "image_url", ...}`)."""
    is_error: bool = False
    error_type: str | None = None
    """One of not_found, bad_arguments, timeout, failed, sandbox_error, forbidden (see `ErrorType`)."""
    metrics: dict[str, float] = field(default_factory=dict)
    elapsed_s: float = 0.0

    @property
    def text(self) -> str:
        """The textual content, with non-text parts replaced by a marker."""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(p.get("text", f"[{p.get('type', 'part')}]") for p in self.content)

    def to_json(self) -> dict[str, Any]:
        return {
            "call_id": self.call_id,
            "content": self.content,
            "is_error": self.is_error,
            "error_type": self.error_type,
            "metrics": self.metrics,
            "elapsed_s": self.elapsed_s,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ToolResult:
        return cls(
            call_id=data["call_id"],
            content=data["content"],
            is_error=bool(data.get("is_error", False)),
            error_type=data.get("error_type"),
            metrics=dict(data.get("metrics") or {}),
            elapsed_s=float(data.get("elapsed_s", 0.0)),
        )

    @classmethod
    def error(cls, call_id: str, error_type: str, message: str, elapsed_s: float = 0.0) -> ToolResult:
        return cls(call_id=call_id, content=message, is_error=True, error_type=error_type, elapsed_s=elapsed_s)


@dataclass(frozen=True)
class Completion:
    """One sampled continuation from a policy backend."""

    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    """Sampler log-probabilities of `token_ids` under the sampling distribution."""
    entropies: tuple[float, ...]
    """Per-token entropy of the sampling distribution (or a top-k proxy where only that is available)."""
    text: str
    """Decoded `token_ids`, without a final end-of-turn token."""
    finish_reason: Literal["stop", "length", "tool_call"]
    """`stop`: end of turn; `tool_call`: a closed tool call stopped generation; `length`: token limit."""


@dataclass(frozen=True)
class Turn:
    """The tokens one policy call produced and what the environment appended after it."""

    completion_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    entropies: tuple[float, ...]
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_results: tuple[ToolResult, ...] = ()
    observation_ids: tuple[int, ...] = ()
    """Tokens appended after this turn (tool results, next generation prompt). Always loss-masked."""
    parse_error: str | None = None
    """Why the tool-call markup of this turn could not be parsed, if it could not."""
    reasoning: str | None = None
    """The turn's reasoning block (`<think>…</think>`), when it wrote one: part of `text` and of the sampled ids,
    kept apart so that neither the answer nor the tool calls are read from it."""
    reward: float | None = None
    """Turn-level reward slot (process / information-gain rewards); None = no turn reward."""
    reward_components: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Trajectory:
    """One episode of one task."""

    task_id: str
    group_id: str
    trajectory_id: str
    prompt_ids: tuple[int, ...]
    turns: tuple[Turn, ...]
    stop_reason: StopReason
    messages: tuple[dict[str, Any], ...] = ()
    """The final conversation in OpenAI message format (for logging and template checks)."""
    reward: float | None = None
    """Outcome reward after scoring; None before scoring, for infrastructure failures, and when every weighted
    reward abstained (no score is not a score of 0: such trajectories stay out of group statistics)."""
    reward_components: dict[str, float] = field(default_factory=dict)
    """The value of every reward that scored this trajectory (weight-0 metrics included), written by scoring."""
    measurements: dict[str, float] = field(default_factory=dict)
    """What the scaffold measured of the environment after the last turn (a checker's verdict, a patch's
    similarity to the gold one): inputs that rewards read, kept apart from the components scoring writes."""
    parent_id: str | None = None
    """For a branch: the trajectory it was forked from."""
    branch_turn: int | None = None
    """For a branch: the index of the first turn it does not share with its parent."""
    policy_version: int = 0
    """Learner step whose weights sampled this trajectory."""
    error: str | None = None
    """Infrastructure error message, when `stop_reason` is INFRA_ERROR; for the `agent` scaffold also the exception
    an agent raised on its own account (the episode is kept, as `tool_failure` or `parse_errors`)."""
    answer: str | None = None
    """The final answer text the scaffold extracted, if any."""

    @property
    def token_ids(self) -> list[int]:
        ids = list(self.prompt_ids)
        for turn in self.turns:
            ids += turn.completion_ids
            ids += turn.observation_ids
        return ids

    @property
    def loss_mask(self) -> list[bool]:
        """True exactly on tokens the policy sampled."""
        mask = [False] * len(self.prompt_ids)
        for turn in self.turns:
            mask += [True] * len(turn.completion_ids)
            mask += [False] * len(turn.observation_ids)
        return mask

    @property
    def sampler_logprobs(self) -> list[float]:
        """Sampler log-probabilities aligned with `token_ids` (0 on masked tokens)."""
        out = [0.0] * len(self.prompt_ids)
        for turn in self.turns:
            out += turn.logprobs
            out += [0.0] * len(turn.observation_ids)
        return out

    @property
    def turn_index(self) -> list[int]:
        """For each token, the index of the turn it belongs to (-1 for the prompt)."""
        out = [-1] * len(self.prompt_ids)
        for k, turn in enumerate(self.turns):
            out += [k] * (len(turn.completion_ids) + len(turn.observation_ids))
        return out

    @property
    def num_tool_calls(self) -> int:
        return sum(len(t.tool_calls) for t in self.turns)

    @property
    def num_sampled_tokens(self) -> int:
        return sum(len(t.completion_ids) for t in self.turns)

    @property
    def is_infra_failure(self) -> bool:
        return self.stop_reason is StopReason.INFRA_ERROR


@dataclass(frozen=True)
class TrajectoryGroup:
    """The trajectories of one task in one step: the unit of group-relative advantages."""

    task: Task
    trajectories: tuple[Trajectory, ...]

    @property
    def valid(self) -> tuple[Trajectory, ...]:
        """Trajectories that count for group statistics (infrastructure failures excluded)."""
        return tuple(t for t in self.trajectories if not t.is_infra_failure)


def trajectory_to_json(trajectory: Trajectory) -> dict[str, Any]:
    """A JSON-ready record of a trajectory (the `trajectories/step_*.jsonl` line format)."""
    return {
        "trajectory_id": trajectory.trajectory_id,
        "group_id": trajectory.group_id,
        "task_id": trajectory.task_id,
        "parent_id": trajectory.parent_id,
        "branch_turn": trajectory.branch_turn,
        "policy_version": trajectory.policy_version,
        "stop_reason": trajectory.stop_reason.value,
        "reward": trajectory.reward,
        "reward_components": trajectory.reward_components,
        "measurements": trajectory.measurements,
        "answer": trajectory.answer,
        "error": trajectory.error,
        "messages": list(trajectory.messages),
        "prompt_ids": list(trajectory.prompt_ids),
        "turns": [
            {
                "completion_ids": list(t.completion_ids),
                "logprobs": [round(x, 5) for x in t.logprobs],
                "entropies": [round(x, 4) for x in t.entropies],
                "observation_ids": list(t.observation_ids),
                "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in t.tool_calls],
                "tool_results": [r.to_json() for r in t.tool_results],
                "parse_error": t.parse_error,
                "reasoning": t.reasoning,
                "reward": t.reward,
                "reward_components": t.reward_components,
            }
            for t in trajectory.turns
        ],
    }


def trajectory_from_json(data: dict[str, Any]) -> Trajectory:
    """The inverse of `trajectory_to_json` (turn texts are not stored: they come back empty)."""
    turns = tuple(
        Turn(
            completion_ids=tuple(t["completion_ids"]),
            logprobs=tuple(t["logprobs"]),
            entropies=tuple(t["entropies"]),
            text="",
            tool_calls=tuple(ToolCall(c["id"], c["name"], c["arguments"]) for c in t["tool_calls"]),
            tool_results=tuple(ToolResult.from_json(r) for r in t["tool_results"]),
            observation_ids=tuple(t["observation_ids"]),
            parse_error=t.get("parse_error"),
            reasoning=t.get("reasoning"),
            reward=t.get("reward"),
            reward_components=dict(t.get("reward_components") or {}),
        )
        for t in data["turns"]
    )
    return Trajectory(
        task_id=data["task_id"],
        group_id=data["group_id"],
        trajectory_id=data["trajectory_id"],
        prompt_ids=tuple(data["prompt_ids"]),
        turns=turns,
        stop_reason=StopReason(data["stop_reason"]),
        messages=tuple(data.get("messages") or ()),
        reward=data.get("reward"),
        reward_components=dict(data.get("reward_components") or {}),
        measurements=dict(data.get("measurements") or {}),
        parent_id=data.get("parent_id"),
        branch_turn=data.get("branch_turn"),
        policy_version=data.get("policy_version", 0),
        error=data.get("error"),
        answer=data.get("answer"),
    )
