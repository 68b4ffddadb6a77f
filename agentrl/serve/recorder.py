"""The gateway's session recorder: every chat request of a session becomes a turn of a token-exact trajectory.

A session (named by the client's API key or an `X-Session-Id` header) holds episodes. A request whose messages
extend an episode's history, exactly as the gateway returned it, continues that episode: its prompt is the
episode's ids so far plus the chat template's rendering of the new messages (tool results, a user reply), as in
a scaffold's rollout, so the model samples from, and the learner later scores, the very ids that were recorded.
A request that extends no episode opens a new one from its own rendering.

Two kinds of mismatch are detected and reported on the episode (`mismatches`), never trained on silently:

- `history`: the client sent back a model turn that differs from the one the gateway produced (edited,
  reformatted or dropped output). The request opens a new episode marked with the mismatch; such episodes are
  left out of training unless explicitly allowed.
- `retokenized`: rendering the client's full history from text gives ids other than the recorded ones (a BPE
  merge across a turn boundary, a non-canonical sampled tokenization). The recorded ids are what the model
  really saw, so training uses them; the report says where the two diverge.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentrl.rollout.chat import ChatFormat, ChatSettings
from agentrl.serve.messages import canonical
from agentrl.types import Completion, StopReason, ToolCall, Trajectory, Turn


@dataclass
class Episode:
    """One recorded conversation: the ids the model saw and sampled, turn by turn."""

    episode_id: str
    session_id: str
    group: str
    tools: list[dict[str, Any]] | None
    prompt_ids: list[int]
    messages: list[dict[str, Any]] = field(default_factory=list)
    """Template-form history, ending with the last assistant turn as returned to the client."""
    context: list[int] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    temperatures: list[float] = field(default_factory=list)
    last_eos: bool = True
    reward: float | None = None
    mismatches: list[dict[str, Any]] = field(default_factory=list)
    created: float = field(default_factory=time.time)

    @property
    def trainable(self) -> bool:
        return not any(m["kind"] == "history" for m in self.mismatches)

    def trajectory(self) -> Trajectory:
        last = self.turns[-1] if self.turns else None
        answered = last is not None and not last.tool_calls
        return Trajectory(
            task_id=self.group,
            group_id=self.group,
            trajectory_id=self.episode_id,
            prompt_ids=tuple(self.prompt_ids),
            turns=tuple(self.turns),
            stop_reason=StopReason.ANSWERED if answered else StopReason.MAX_TURNS,
            messages=tuple(self.messages),
            reward=self.reward,
            reward_components={} if self.reward is None else {"client": self.reward},
            answer=last.text if answered else None,
        )

    def to_json(self) -> dict[str, Any]:
        from agentrl.types import trajectory_to_json

        return {
            "episode_id": self.episode_id,
            "session_id": self.session_id,
            "group": self.group,
            "tools": self.tools,
            "temperatures": self.temperatures,
            "trainable": self.trainable,
            "mismatches": self.mismatches,
            "trajectory": trajectory_to_json(self.trajectory()),
        }


@dataclass
class _Session:
    episodes: list[Episode] = field(default_factory=list)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


@dataclass
class Pending:
    """A request between `begin` and `finish`: which episode it extends and the ids the model will see."""

    episode: Episode
    prompt_ids: list[int]
    observation_ids: list[int] | None
    """Ids appended after the episode's last turn (None when the request opens the episode)."""
    messages: list[dict[str, Any]]

    def force(self, ids: Sequence[int]) -> None:
        """Append ids the model did not choose (a forced tool-call opening) to what it sees before sampling: they
        are recorded as prompt or observation, outside the loss mask."""
        if not ids:
            return
        self.prompt_ids = self.prompt_ids + list(ids)
        if self.observation_ids is None:
            self.episode.prompt_ids = self.episode.prompt_ids + list(ids)
        else:
            self.observation_ids = self.observation_ids + list(ids)


class SessionRecorder:
    """Records gateway sessions; optionally appends each episode's latest state to `<directory>/sessions.jsonl`."""

    def __init__(self, tokenizer: Any, directory: str | Path | None = None, *, settings: ChatSettings | None = None):
        self.tokenizer = tokenizer
        self.settings = settings
        self.directory = Path(directory) if directory is not None else None
        self.sessions: dict[str, _Session] = {}
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)

    def lock(self, session_id: str) -> asyncio.Lock:
        """Requests of one session are recorded one at a time, in arrival order."""
        return self.sessions.setdefault(session_id, _Session()).lock

    def episodes(self, session_id: str | None = None) -> list[Episode]:
        if session_id is not None:
            return list(self.sessions[session_id].episodes) if session_id in self.sessions else []
        return [e for s in self.sessions.values() for e in s.episodes]

    def begin(
        self,
        session_id: str,
        messages: Sequence[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        *,
        group: str | None = None,
    ) -> Pending:
        """Find the episode this request continues (or open one) and the exact prompt ids to sample from."""
        session = self.sessions.setdefault(session_id, _Session())
        messages = list(messages)
        chat = ChatFormat(self.tokenizer, tools, self.settings)
        keys = [canonical(m) for m in messages]
        for episode in reversed(session.episodes):
            n = len(episode.messages)
            if not n or episode.tools != tools or n >= len(keys):
                continue
            if [canonical(m) for m in episode.messages] == keys[:n]:
                # the recorded turns (reasoning included) with the client's new messages after them
                history = [*episode.messages, *messages[n:]]
                obs = chat.observation_ids(episode.messages, messages[n:], sampled_eos=episode.last_eos)
                prompt = episode.context + obs
                if not chat.history_rewritten_by():  # only then must a fresh rendering equal the recorded ids
                    fresh = chat.prompt_ids(history)
                    if fresh != prompt:
                        episode.mismatches.append(_token_mismatch(self.tokenizer, fresh, prompt, len(episode.turns)))
                return Pending(episode, prompt, obs, history)
        episode = Episode(
            episode_id=f"{session_id}/{len(session.episodes)}",
            session_id=session_id,
            group=group or _group_of(messages),
            tools=tools,
            prompt_ids=chat.prompt_ids(messages),
        )
        diverged = _history_divergence(session.episodes, keys)
        if diverged is not None:
            episode.mismatches.append(diverged)
        session.episodes.append(episode)
        return Pending(episode, list(episode.prompt_ids), None, messages)

    def finish(
        self,
        pending: Pending,
        completion: Completion,
        tool_calls: Sequence[ToolCall],
        reply: dict[str, Any],
        *,
        temperature: float,
        parse_error: str | None = None,
    ) -> int:
        """Record the sampled turn; returns its index in the episode."""
        episode = pending.episode
        if pending.observation_ids is not None and episode.turns:
            episode.turns[-1] = dataclasses.replace(episode.turns[-1], observation_ids=tuple(pending.observation_ids))
        episode.turns.append(
            Turn(
                tuple(completion.token_ids),
                tuple(completion.logprobs),
                tuple(completion.entropies),
                completion.text,
                tool_calls=tuple(tool_calls),
                parse_error=parse_error,
            )
        )
        episode.temperatures.append(temperature)
        episode.context = pending.prompt_ids + list(completion.token_ids)
        episode.messages = pending.messages + [reply]
        episode.last_eos = completion.finish_reason == "stop"
        self._save(episode)
        return len(episode.turns) - 1

    def set_reward(
        self, session_id: str, reward: float, *, episode: int | None = None, turn: int | None = None
    ) -> Episode:
        """Attach an outcome reward to an episode (default: the session's latest), or a reward to one turn."""
        episodes = self.episodes(session_id)
        if not episodes:
            raise KeyError(f"no recorded session {session_id!r}")
        target = episodes[-1 if episode is None else episode]
        if turn is None:
            target.reward = reward
        else:
            target.turns[turn] = dataclasses.replace(
                target.turns[turn], reward=reward, reward_components={"client": reward}
            )
        self._save(target)
        return target

    def _save(self, episode: Episode) -> None:
        if self.directory is not None:
            with (self.directory / "sessions.jsonl").open("a") as f:
                f.write(json.dumps(episode.to_json()) + "\n")


def _group_of(messages: Sequence[dict[str, Any]]) -> str:
    """Episodes that open with the same system and user messages form one group (the same task)."""
    opening = [canonical(m) for m in messages if m["role"] in ("system", "user")][:2]
    return hashlib.sha1(json.dumps(opening).encode()).hexdigest()[:12]


def _history_divergence(episodes: Sequence[Episode], keys: list[tuple[Any, ...]]) -> dict[str, Any] | None:
    """A `history` mismatch when the request rewrites a model turn some episode recorded, else None."""
    for episode in reversed(episodes):
        recorded = [canonical(m) for m in episode.messages]
        i = next(
            (k for k, (a, b) in enumerate(zip(recorded, keys, strict=False)) if a != b), min(len(recorded), len(keys))
        )
        if i >= len(keys) or i >= len(recorded):
            continue
        if recorded[i][0] == "assistant" or keys[i][0] == "assistant":
            return {
                "kind": "history",
                "episode_id": episode.episode_id,
                "message_index": i,
                "expected": _short(recorded[i]),
                "got": _short(keys[i]),
            }
    return None


def _token_mismatch(tokenizer: Any, fresh: list[int], recorded: list[int], turn: int) -> dict[str, Any]:
    i = next(
        (k for k, (a, b) in enumerate(zip(fresh, recorded, strict=False)) if a != b), min(len(fresh), len(recorded))
    )
    return {
        "kind": "retokenized",
        "turn": turn,
        "position": i,
        "expected": tokenizer.decode(recorded[i : i + 8]),
        "got": tokenizer.decode(fresh[i : i + 8]),
    }


def _short(key: tuple[Any, ...]) -> str:
    role, content, calls = key
    text = content if not calls else f"{content} {calls}"
    return f"{role}: {text[:120]}"
