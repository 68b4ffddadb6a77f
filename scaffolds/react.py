"""The generic multi-turn tool-calling scaffold (ReAct style), token-exact.

One episode: render the opening messages (the system prompt and the task's prompt, or the task's own chat
messages) with the policy's chat template, then alternate
  policy turn → parse `<tool_call>` blocks → run the calls (concurrently) → append the results
until a turn without tool calls (the answer), the turn limit, the token budget, or too many consecutive
malformed turns. The ids the policy sampled are kept as they are; everything appended between turns is the
template's rendering of the new messages, tokenized as a delta and loss-masked (see `agentrl/rollout/chat.py`).
Malformed markup never raises: the model is told what was wrong in a user message and may try again.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import zlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from agentrl.config import RolloutConfig
from agentrl.errors import InfraError
from agentrl.protocols import OnToolRound, Policy, SamplingParams, ToolBackend, ToolSession
from agentrl.rollout.chat import ChatFormat, ParsedTurn
from agentrl.tool import collect_tools
from agentrl.types import StopReason, Task, ToolCall, ToolResult, Trajectory, Turn

DEFAULT_SYSTEM_PROMPT = "Use the tools. Reply with only the final answer."
"""The prompt the bundled scaffolds use, so the one the shipped tiny policies learned with: the generic scaffold
works with them as it is (they answer another prompt far worse)."""


class _EpisodeEnd(Exception):
    def __init__(self, reason: StopReason, error: str | None = None):
        super().__init__(reason.value)
        self.reason, self.error = reason, error


class ReactScaffold:
    """Multi-turn tool use with Qwen/Hermes tool-call markup."""

    name = "react"

    def __init__(
        self,
        *,
        tools: Sequence[Any] = (),  # toolset specs: @tool functions, modules, toolset classes
        tasks: Callable[[str], Sequence[Task]] | None = None,
        system_prompt: str = DEFAULT_SYSTEM_PROMPT,
        rewards: Sequence[str] = ("exact_match",),
        rollout: RolloutConfig | None = None,
        parallel_tool_calls: bool = True,
    ):
        self._tools = list(tools)
        self._tool_names = tuple(t.name for spec in self._tools for t in collect_tools(spec)) or None
        self._tasks = tasks
        self.system_prompt = system_prompt
        self._rewards = tuple(rewards)
        self.rollout = rollout or RolloutConfig()
        self.parallel_tool_calls = parallel_tool_calls
        self._schemas: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        self._task_cache: dict[str, Sequence[Task]] = {}

    # --- what the scaffold owns ------------------------------------------------------------------------

    def tasks(self, split: str) -> Sequence[Task]:
        if self._tasks is None:
            return ()
        if split not in self._task_cache:
            self._task_cache[split] = self._tasks(split)
        return self._task_cache[split]

    def toolsets(self) -> Sequence[Any]:
        return self._tools

    def reward_names(self) -> Sequence[str]:
        return self._rewards

    def tool_names(self, task: Task | None = None) -> tuple[str, ...] | None:
        """Tools offered for `task`: its `metadata["tools"]`, else all the scaffold's tools (None = server's)."""
        if task is not None and task.metadata.get("tools"):
            return tuple(task.metadata["tools"])
        return self._tool_names

    def initial_messages(self, task: Task) -> list[dict[str, Any]]:
        """The task's own messages (its few-shot turns included) when it has them, after the scaffold's system
        prompt unless they bring one; else the system prompt and the task's prompt."""
        system = {"role": "system", "content": self.system_prompt}
        if task.messages:
            messages = copy.deepcopy(list(task.messages))  # the episode appends to them; the task stays as it was
            return messages if any(m.get("role") == "system" for m in messages) else [system, *messages]
        return [system, {"role": "user", "content": task.prompt}]

    def extract_answer(self, parsed: ParsedTurn) -> str:
        return parsed.content

    def ends_episode(self, calls: Sequence[ToolCall]) -> bool:
        """Whether these tool calls (just run) end the episode, as a `submit` tool does. Never, by default."""
        return False

    # --- the episode -----------------------------------------------------------------------------------

    async def run(
        self,
        task: Task,
        policy: Policy,
        tools: ToolBackend,
        *,
        group_id: str,
        trajectory_id: str,
        seed: int | None = None,
        on_tool_round: OnToolRound | None = None,
    ) -> Trajectory:
        """One episode. `on_tool_round`, if given, is awaited after every tool round that the policy will see,
        with a `ForkPoint` from which the episode can be branched (ARPO/AEPO rollouts)."""
        names = self.tool_names(task)
        key = names or ()
        if key not in self._schemas:
            self._schemas[key] = await tools.schemas(names)
        chat = ChatFormat.of(policy, self._schemas[key])
        messages = self.initial_messages(task)
        prompt_ids = chat.prompt_ids(messages)
        episode = _Episode(self, task, policy, chat, messages, prompt_ids, seed)
        episode.on_tool_round = on_tool_round
        return await self._play(
            episode, lambda: _open_session(self, task, tools, names), group_id=group_id, trajectory_id=trajectory_id
        )

    async def _play(
        self,
        episode: _Episode,
        open_session: Callable[[], Awaitable[ToolSession]],
        *,
        group_id: str,
        trajectory_id: str,
        parent_id: str | None = None,
        branch_turn: int | None = None,
    ) -> Trajectory:
        """Play `episode` (fresh, or a branch resuming after its parent's tool round) to its end."""
        task = episode.task
        episode.group_id, episode.trajectory_id = group_id, trajectory_id
        session: ToolSession | None = None
        try:
            session = await open_session()
            reason, answer = await episode.play(session)
            measurements = await _finish_episode(self, task, session)
            error = None
        except _EpisodeEnd as end:
            reason, answer, error, measurements = end.reason, None, end.error, {}
        finally:
            if session is not None:
                try:
                    await session.close()
                except Exception:  # closing is best effort; the server also collects idle sessions
                    pass
        return Trajectory(
            task_id=task.id,
            group_id=group_id,
            trajectory_id=trajectory_id,
            prompt_ids=episode.prompt_ids,
            turns=tuple(episode.turns),
            stop_reason=reason,
            messages=tuple(episode.messages),
            policy_version=episode.policy_version,
            error=error,
            answer=answer,
            measurements=measurements,
            parent_id=parent_id,
            branch_turn=branch_turn,
        )

    # --- hooks for scaffolds whose tasks live in the tool session's environment ---------------------------

    async def open_episode(self, task: Task, tools: ToolBackend, names: Sequence[str] | None) -> ToolSession:
        """The episode's tool session, ready for the first turn. Scaffolds that prepare an environment per task
        (files in the workspace) override this; both `run` and the native-tool-call transport call it."""
        return await tools.open_session(names)

    async def finish_episode(self, task: Task, session: ToolSession) -> dict[str, float]:
        """Measurements of the environment after the last turn, before the session closes (a checker's outcome):
        the trajectory's `measurements`, for rewards to read. None by default."""
        return {}


async def _open_session(
    scaffold: ReactScaffold, task: Task, tools: ToolBackend, names: Sequence[str] | None
) -> ToolSession:
    try:
        return await scaffold.open_episode(task, tools, names)
    except InfraError as e:
        raise _EpisodeEnd(StopReason.INFRA_ERROR, str(e)) from e


async def _finish_episode(scaffold: ReactScaffold, task: Task, session: ToolSession) -> dict[str, float]:
    try:
        return dict(await scaffold.finish_episode(task, session))
    except InfraError as e:
        raise _EpisodeEnd(StopReason.INFRA_ERROR, str(e)) from e


class _Episode:
    """The mutable state of one episode (the records it produces are frozen)."""

    def __init__(self, scaffold, task, policy, chat, messages, prompt_ids, seed):
        self.s: ReactScaffold = scaffold
        self.task, self.policy, self.chat = task, policy, chat
        self.messages: list[dict[str, Any]] = messages
        self.prompt_ids = tuple(prompt_ids)
        self.context: list[int] = list(prompt_ids)
        self.turns: list[Turn] = []
        self.seed = seed if seed is not None else zlib.crc32(task.id.encode())
        self.on_tool_round: OnToolRound | None = None
        # the weights the episode started with: a rollout carried into the next step keeps its first version
        self.policy_version = getattr(policy, "version", 0)
        self.group_id = self.trajectory_id = ""

    @property
    def stop(self) -> tuple[str, ...]:
        """Stop strings: one call per turn ends sampling at the call's closing markup, where the format has one."""
        closing = self.chat.tool_format.call_stop
        return () if self.s.parallel_tool_calls or closing is None else (closing,)

    def copy(self, seed: int) -> _Episode:
        """A twin that shares everything so far and samples its own future (a new seed)."""
        twin = copy.copy(self)
        twin.messages, twin.context, twin.turns = list(self.messages), list(self.context), list(self.turns)
        twin.seed = seed
        return twin

    async def play(self, session: ToolSession) -> tuple[StopReason, str | None]:
        cfg = self.s.rollout
        parse_errors = 0
        for k in range(len(self.turns), cfg.max_turns):  # a branch resumes at its first own turn
            budget = min(cfg.max_new_tokens_per_turn, cfg.max_tokens_per_episode - len(self.context))
            if budget <= 0:
                return StopReason.MAX_TOKENS, None
            params = SamplingParams(
                max_new_tokens=budget,
                temperature=cfg.temperature,
                top_p=cfg.top_p,
                stop=self.stop,
                seed=(self.seed * 1009 + k) % 2**62,
            )
            try:
                completion = await self.policy.generate(self.context, params)
            except Exception as e:  # the sampler failing is the infrastructure's fault, not the policy's
                raise _EpisodeEnd(StopReason.INFRA_ERROR, f"policy failed: {type(e).__name__}: {e}") from e
            parsed = self.chat.parse(completion.text, id_prefix=f"call_{k}")
            turn = Turn(
                tuple(completion.token_ids),
                tuple(completion.logprobs),
                tuple(completion.entropies),
                completion.text,
                tool_calls=parsed.tool_calls,
                parse_error=parsed.error,
                reasoning=parsed.reasoning,
            )
            self.context += completion.token_ids
            self.messages.append(self.chat.assistant_message(parsed, completion.text))
            if completion.finish_reason == "length":
                self.turns.append(turn)
                return StopReason.MAX_TOKENS, None
            sampled_eos = completion.finish_reason == "stop"
            last = k == cfg.max_turns - 1
            if parsed.error:
                parse_errors += 1
                if parse_errors >= cfg.max_parse_errors:
                    self.turns.append(turn)
                    return StopReason.PARSE_ERRORS, None
                self._append(turn, [self.chat.correction(parsed.error)], sampled_eos, feed_back=not last)
                continue
            parse_errors = 0
            if not parsed.tool_calls:
                self.turns.append(turn)
                return StopReason.ANSWERED, self.s.extract_answer(parsed)
            results = await self._call_tools(session, parsed.tool_calls)
            turn = dataclasses.replace(turn, tool_results=tuple(results))
            tool_messages = [
                {"role": "tool", "tool_call_id": c.id, "name": c.name, "content": self._clip(r.text)}
                for c, r in zip(parsed.tool_calls, results, strict=False)
            ]
            ends = self.s.ends_episode(parsed.tool_calls)
            self._append(turn, tool_messages, sampled_eos, feed_back=not (last or ends))
            if ends:
                return StopReason.ANSWERED, None
            if self.on_tool_round is not None and not last:
                await self.on_tool_round(ForkPoint(self, session))
        return StopReason.MAX_TURNS, None

    async def _call_tools(self, session: ToolSession, calls: Sequence[ToolCall]) -> list[ToolResult]:
        try:
            return list(await asyncio.gather(*(session.call(c) for c in calls)))
        except InfraError as e:
            raise _EpisodeEnd(StopReason.INFRA_ERROR, str(e)) from e

    def _append(self, turn: Turn, new_messages: list[dict[str, Any]], sampled_eos: bool, feed_back: bool) -> None:
        """Record the turn and the messages after it; their ids only when the policy will see them."""
        obs: list[int] = []
        if feed_back:
            obs = self.chat.observation_ids(self.messages, new_messages, sampled_eos=sampled_eos)
            self.context += obs
        self.messages.extend(new_messages)
        self.turns.append(dataclasses.replace(turn, observation_ids=tuple(obs)))

    def _clip(self, text: str) -> str:
        limit = self.s.rollout.max_tool_output_chars
        if len(text) <= limit:
            return text
        return text[:limit] + f"\n[... truncated {len(text) - limit} characters]"


class ForkPoint:
    """An episode right after a tool round, before its next policy turn: where ARPO/AEPO branch."""

    def __init__(self, episode: _Episode, session: ToolSession):
        self._episode, self._session = episode, session

    @property
    def turns(self) -> tuple[Turn, ...]:
        return tuple(self._episode.turns)

    @property
    def trajectory_id(self) -> str:
        return self._episode.trajectory_id

    async def fork(
        self, *, trajectory_id: str, seed: int, on_tool_round: OnToolRound | None = None
    ) -> Awaitable[Trajectory]:
        """Fork the tool session now, so the branch starts from this moment's tool state, and return the branch's
        episode (not started): it shares every token so far and samples its own turns from `seed`. Raises
        an `InfraError` (a `ToolServerError`, say) when the session cannot be forked."""
        session = await self._session.fork()
        twin = self._episode.copy(seed)
        twin.on_tool_round = on_tool_round

        async def ready() -> ToolSession:
            return session

        parent = self._episode
        return parent.s._play(
            twin,
            ready,
            group_id=parent.group_id,
            trajectory_id=trajectory_id,
            parent_id=parent.trajectory_id,
            branch_turn=len(twin.turns),
        )
