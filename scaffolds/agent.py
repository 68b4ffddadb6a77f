"""The `agent` scaffold: online RL for an agent written against any OpenAI client.

The agent is the user's own async function, `async def agent(task, client, model) -> str | None`: it gets the task,
an `openai.AsyncOpenAI` client and the model name to send, runs however it likes (its own tools, the OpenAI Agents
SDK, several calls in parallel) and returns its final answer, or None. Every trajectory:

1. opens a fresh session of the recording gateway (`agentrl/serve`) over the very policy object the trainer samples
   with, reached through an in-process ASGI transport: no port, the same continuous batching, and each step's
   rollouts sample from the current weights (the trajectory carries the policy version it started under);
2. runs the agent. Each chat request it sends is fitted to the rollout first: `temperature` and `top_p` become
   the rollout's (the learner scores at that temperature), `max_tokens` is capped at
   `rollout.max_new_tokens_per_turn`, `seed` is derived from the trajectory's seed, and `model` is the served one.
   Calls beyond `rollout.max_turns`, and prompts past `rollout.max_tokens_per_episode`, are refused with a 400;
3. turns the recorded episode into the trajectory: the ids the model saw and sampled and their sampler logprobs,
   exactly as recorded (`Episode.trajectory`), with the agent's return value as `answer`, read by the rewards.

How an episode ends:

- the agent returns → `answered`, answer = its return value (`str()` of it; None stays None and scores as no
  answer); `max_turns` or `max_tokens` instead when a limit refused a call or cut the last turn short;
- the agent raises → the episode is kept, as the agent's own failure: no answer, the exception in `error`; the
  stop reason is the limit that refused a call if one did, else `parse_errors` when the last model turn was
  malformed markup, else `tool_failure`;
- infrastructure fails → `infra_error`, excluded from training, never a zero reward: the last model call failed
  in the gateway or the sampler (even if the agent caught it), or the agent raised an `InfraError`, a transport
  error (`httpx.TransportError`, `ConnectionError`, `openai.APIConnectionError`) or an `openai` 5xx;
- the agent sent back model output other than what the policy produced (a `history` mismatch, see
  `agentrl/serve/recorder.py`) → `infra_error` with an error naming the mismatch: what it would train on is not
  what the model saw;
- the agent made no model call → `infra_error`: there is nothing to train on.

Several conversations in one run (a planner call and a worker conversation, say) are recorded as several episodes
of the session; the trajectory is the episode of the agent's last model call, the one that led to its answer, and
the others are not trained on. `measurements` carries `agent_episodes` (how many there were), `agent_error` and
`retokenized` (the recorded ids differ from a fresh rendering of the history; they are trained on as recorded),
logged as `measure/<name>`.

The agent's own tools run in the agent, not on the tool server: `toolsets()` is empty and the episode's tool
results are the tool messages the agent sent back. The agent must not block the event loop (run blocking tools in
`asyncio.to_thread`): every trajectory of the step runs on it.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import uuid
import zlib
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from agentrl.config import RolloutConfig
from agentrl.errors import ConfigError, InfraError
from agentrl.protocols import OnToolRound, Policy, ToolBackend
from agentrl.serve.app import create_app
from agentrl.serve.chat_completions import ChatService
from agentrl.serve.recorder import Episode, SessionRecorder
from agentrl.types import StopReason, Task, ToolResult, Trajectory

if TYPE_CHECKING:
    from agentrl.config import RunConfig

AgentFunction = Callable[[Task, Any, str], Awaitable[Any]]
"""`async def agent(task: Task, client: openai.AsyncOpenAI, model: str) -> str | None`."""

GATEWAY_URL = "http://agentrl-gateway/v1"
"""The base URL the agent's client is given; requests never leave the process (the transport is ASGI)."""
DEFAULT_MODEL_NAME = "policy"
DEFAULT_REWARDS = ("exact_match",)


class AgentScaffold:
    """Online RL for a user's async agent function: each trajectory is one run of the agent, recorded token-exact
    through the gateway over the trainer's policy."""

    name = "agent"

    def __init__(
        self,
        *,
        agent: AgentFunction | None = None,
        tasks: str | Path | Callable[[str], Sequence[Task]] | Sequence[Task] | None = None,
        rewards: Sequence[str] = DEFAULT_REWARDS,
        rollout: RolloutConfig | None = None,
        model_name: str = DEFAULT_MODEL_NAME,
    ):
        if agent is None:
            raise ConfigError("the agent scaffold needs an agent: agent=package.module:function (an async function)")
        if not (inspect.iscoroutinefunction(agent) or inspect.iscoroutinefunction(type(agent).__call__)):
            raise ConfigError(f"agent {getattr(agent, '__name__', agent)!r} must be an async function (async def)")
        self.agent = agent
        self._tasks = _task_function(tasks)
        self._rewards = tuple(rewards)
        self.rollout = rollout or RolloutConfig()
        self.model_name = model_name
        self._task_cache: dict[str, Sequence[Task]] = {}
        self._gateways: dict[tuple[int, int, int], _Gateway] = {}

    @classmethod
    def from_config(cls, config: RunConfig, rollout: RolloutConfig | None = None) -> AgentScaffold:
        """The scaffold of `agentrl train scaffold=agent agent=module:function tasks=FILE`."""
        from agentrl.registry import import_path
        from agentrl.tasks import task_source

        if not config.agent:
            raise ConfigError("scaffold=agent needs agent=package.module:function (an async agent function)")
        if config.tools or config.system_prompt:
            raise ConfigError("tools and system_prompt configure the react scaffold; an agent brings its own")
        return cls(
            agent=import_path(config.agent),
            tasks=task_source(config.tasks) if config.tasks else None,
            rewards=config.rewards or DEFAULT_REWARDS,
            rollout=rollout or config.rollout,
            model_name=config.policy.model,
        )

    # --- what the scaffold owns ------------------------------------------------------------------------

    def tasks(self, split: str) -> Sequence[Task]:
        if self._tasks is None:
            return ()
        if split not in self._task_cache:
            self._task_cache[split] = self._tasks(split)
        return self._task_cache[split]

    def toolsets(self) -> Sequence[Any]:
        return ()

    def reward_names(self) -> Sequence[str]:
        return self._rewards

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
        on_tool_round: OnToolRound | None = None,  # an agent's episode has no fork points: never called
    ) -> Trajectory:
        """One run of the agent on `task`, recorded as one trajectory (see the module docstring)."""
        import openai

        gateway = self._gateway(policy)
        session_id = f"agent-{uuid.uuid4().hex}"
        lane = _Lane(gateway, session_id, seed if seed is not None else zlib.crc32(task.id.encode()), self.rollout)
        version = getattr(policy, "version", 0)  # the weights the episode started with
        client = openai.AsyncOpenAI(
            base_url=GATEWAY_URL,
            api_key=session_id,
            max_retries=0,  # a failure is the gateway's answer, not a network blip worth retrying
            default_headers={"X-Session-Id": session_id},
            http_client=httpx.AsyncClient(transport=lane, timeout=None),
        )
        answer: Any = None
        raised: Exception | None = None
        try:
            answer = await self.agent(task, client, self.model_name)
        except Exception as e:  # the agent's own failure, or the infrastructure's: told apart below
            raised = e
        finally:
            await client.close()
            recorded = gateway.recorder.sessions.pop(session_id, None)
        episodes = list(recorded.episodes) if recorded is not None else []
        trajectory = _outcome(episodes, lane, answer, raised)
        return dataclasses.replace(
            trajectory, task_id=task.id, group_id=group_id, trajectory_id=trajectory_id, policy_version=version
        )

    def _gateway(self, policy: Policy) -> _Gateway:
        """The recording gateway over `policy`: one per policy object, shared by all its trajectories."""
        key = (id(policy), self.rollout.max_tokens_per_episode, self.rollout.max_new_tokens_per_turn)
        gateway = self._gateways.get(key)  # shared by copies of this scaffold (train and eval): keyed by what it holds
        if gateway is None or gateway.policy is not policy:
            recorder = SessionRecorder(policy.tokenizer, settings=getattr(policy, "chat_settings", None))
            service = ChatService(
                policy,
                (self.model_name,),
                recorder=recorder,
                # the episode's token budget as the context window: the gateway caps each turn to what is left of it
                context_tokens=self.rollout.max_tokens_per_episode,
                default_max_tokens=self.rollout.max_new_tokens_per_turn,
            )
            gateway = self._gateways[key] = _Gateway(policy, recorder, create_app(service), self.model_name)
        return gateway


@dataclasses.dataclass
class _Gateway:
    policy: Any
    recorder: SessionRecorder
    app: Any
    model_name: str


class _Lane(httpx.AsyncBaseTransport):
    """One trajectory's way into the gateway: fits each chat request to the rollout, counts the model calls, and
    notes what the trajectory's outcome depends on (a limit that refused a call, an infrastructure failure of the
    last call, the episode the last call extended)."""

    def __init__(self, gateway: _Gateway, session_id: str, seed: int, rollout: RolloutConfig):
        self.inner = httpx.ASGITransport(app=gateway.app)
        self.recorder, self.model_name = gateway.recorder, gateway.model_name
        self.session_id, self.seed, self.rollout = session_id, seed, rollout
        self.model_calls = 0
        self.limit: StopReason | None = None
        self.failure: str | None = None
        """Why the last model call failed in the gateway or sampler; None once a later call succeeds."""
        self.last_episode: str | None = None
        self.truncated = False
        """The last answered call ran out of tokens (the turn's or the episode's)."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method != "POST":
            return await self.inner.handle_async_request(request)
        if not request.url.path.endswith("/chat/completions"):
            return _refusal(404, "only /v1/chat/completions calls are recorded for training", "not_recorded")
        if self.model_calls >= self.rollout.max_turns:
            self.limit = StopReason.MAX_TURNS
            return _refusal(400, f"rollout.max_turns={self.rollout.max_turns} model calls reached", "max_turns")
        request = self._fitted(request, await request.aread())
        self.model_calls += 1
        before = self._turn_counts()
        try:
            response = await self.inner.handle_async_request(request)
        except Exception as e:
            self.failure = f"{type(e).__name__}: {e}"
            raise
        self.failure = f"the gateway answered {response.status_code}" if response.status_code >= 500 else None
        content = await response.aread()  # buffered already: the ASGI transport returns whole responses
        if response.status_code == 400 and b"context_length_exceeded" in content:
            self.limit = StopReason.MAX_TOKENS
        if response.status_code == 200:
            self.truncated = "length" in _finish_reasons(content)
        after = self._turn_counts()
        grown = [k for k, n in after.items() if n > before.get(k, 0)]
        self.last_episode = grown[-1] if grown else self.last_episode
        return response

    def _fitted(self, request: httpx.Request, content: bytes) -> httpx.Request:
        try:
            body = json.loads(content)
        except ValueError:
            return request  # the gateway answers malformed bodies with a 400
        if not isinstance(body, dict):
            return request
        cap = self.rollout.max_new_tokens_per_turn
        asked = body.get("max_completion_tokens") or body.get("max_tokens")
        tokens = min(asked, cap) if isinstance(asked, int) and not isinstance(asked, bool) and asked > 0 else cap
        body.update(
            model=self.model_name,
            temperature=self.rollout.temperature,
            top_p=self.rollout.top_p,
            max_tokens=tokens,
            max_completion_tokens=tokens,
            seed=(self.seed * 1009 + self.model_calls) % 2**62,
        )
        headers = [(k, v) for k, v in request.headers.raw if k.lower() != b"content-length"]
        return httpx.Request(request.method, request.url, headers=headers, content=json.dumps(body).encode())

    def _turn_counts(self) -> dict[str, int]:
        return {e.episode_id: len(e.turns) for e in self.recorder.episodes(self.session_id)}


def _refusal(status: int, message: str, code: str) -> httpx.Response:
    """An OpenAI-style error answered without reaching the gateway."""
    return httpx.Response(status, json={"error": {"message": message, "type": code, "param": None, "code": code}})


def _finish_reasons(content: bytes) -> set[str]:
    """The finish reasons in a chat completion, plain JSON or server-sent events."""
    lines = [line[5:] for line in content.splitlines() if line.startswith(b"data:")] or [content]
    reasons = set()
    for line in lines:
        try:
            data = json.loads(line)
        except ValueError:  # `data: [DONE]`
            continue
        choices = data.get("choices") if isinstance(data, dict) else None
        reasons.update(c["finish_reason"] for c in choices or () if isinstance(c, dict) and c.get("finish_reason"))
    return reasons


def _outcome(episodes: list[Episode], lane: _Lane, answer: Any, raised: Exception | None) -> Trajectory:
    """The trajectory of one agent run (its ids are the caller's to set)."""
    chosen = next((e for e in episodes if e.episode_id == lane.last_episode), None)
    chosen = chosen or next((e for e in reversed(episodes) if e.turns), None)
    base = _with_tool_results(chosen.trajectory()) if chosen is not None else Trajectory("", "", "", (), (), _INFRA)
    measurements = {
        "agent_episodes": float(len(episodes)),
        "agent_error": float(raised is not None),
        "retokenized": float(any(m["kind"] == "retokenized" for e in episodes for m in e.mismatches)),
    }
    excluded = _exclusion(episodes, lane, raised, chosen)
    if excluded is not None:
        return dataclasses.replace(base, stop_reason=_INFRA, answer=None, error=excluded, measurements=measurements)
    if raised is not None:
        malformed = chosen is not None and chosen.turns[-1].parse_error is not None
        reason = lane.limit or (StopReason.PARSE_ERRORS if malformed else StopReason.TOOL_FAILURE)
        text, error = None, f"agent raised {_describe(raised)}"
    else:
        reason = lane.limit or (StopReason.MAX_TOKENS if lane.truncated else StopReason.ANSWERED)
        error = None
        text = None if answer is None else str(answer)
    return dataclasses.replace(base, stop_reason=reason, answer=text, error=error, measurements=measurements)


def _exclusion(episodes: list[Episode], lane: _Lane, raised: Exception | None, chosen: Episode | None) -> str | None:
    """Why the run must not be trained on (it ends as an infrastructure failure), or None."""
    mismatch = next((m for e in episodes for m in e.mismatches if m["kind"] == "history"), None)
    if mismatch is not None:
        return (
            f"history mismatch: the agent sent back model output other than the policy's (message "
            f"{mismatch['message_index']}: expected {mismatch['expected']!r}, got {mismatch['got']!r}); not trained on"
        )
    if lane.failure is not None:
        return f"the gateway or sampler failed: {lane.failure}"
    if raised is not None and _is_infra(raised):
        return f"the agent's transport failed: {_describe(raised)}"
    if chosen is None:
        return "the agent made no model call" + (f" (it raised {_describe(raised)})" if raised is not None else "")
    return None


_INFRA = StopReason.INFRA_ERROR


def _is_infra(error: BaseException) -> bool:
    """Whether `error`, or an exception it was raised from, is a failure of the infrastructure rather than of the
    agent: an `InfraError`, a transport error, or an OpenAI client's connection error or 5xx."""
    import openai

    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, (InfraError, httpx.TransportError, ConnectionError, openai.APIConnectionError)):
            return True
        if isinstance(current, openai.APIStatusError) and current.status_code >= 500:
            return True
        current = current.__cause__ or current.__context__
    return False


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {' '.join(str(error).split())[:500]}"


def _with_tool_results(trajectory: Trajectory) -> Trajectory:
    """The trajectory with each turn's tool results: the tool messages the agent sent back after it (the recorder
    keeps them only as messages and observation ids)."""
    messages = list(trajectory.messages)
    assistants = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    turns = list(trajectory.turns)
    if len(assistants) < len(turns):
        return trajectory
    for k, start in enumerate(assistants[len(assistants) - len(turns) :]):
        results = []
        for m in messages[start + 1 :]:
            if m.get("role") != "tool":
                break
            results.append(ToolResult(call_id=str(m.get("tool_call_id") or ""), content=m.get("content") or ""))
        turns[k] = dataclasses.replace(turns[k], tool_results=tuple(results))
    return dataclasses.replace(trajectory, turns=tuple(turns))


def _task_function(tasks: Any) -> Callable[[str], Sequence[Task]] | None:
    """`tasks` as a `split -> tasks` function: such a function, a sequence of tasks, or a task source (a file)."""
    if tasks is None or callable(tasks):
        return tasks
    if isinstance(tasks, (str, Path)) or not isinstance(tasks, Sequence):
        from agentrl.tasks import task_source

        return task_source(tasks)
    fixed = tuple(tasks)
    return lambda split: [t for t in fixed if t.split == split]
