"""A scaffold's episode over a chat API with native tool calls (hosted models that never show token ids).

The scaffold still owns everything that makes its task what it is (tasks, system prompt, tool set, answer
extraction, turn limit); only the transport differs from `ReactScaffold.run`: the endpoint is sent messages and
tool schemas and answers with OpenAI `tool_calls`, which run on the same tool server. Turns carry no token ids,
so these trajectories are for evaluation, not training. Failures of the endpoint after retries end the episode
as an infrastructure error; malformed arguments become tool errors the model sees, as in the text format.

Images a tool returns (the GUI toolset's screenshots) reach the model as `image_url` parts of a user message right
after the round's tool messages: the OpenAI chat API accepts only text in tool messages, and vision models served
by vLLM, litellm or hosted APIs all take images from user messages.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agentrl.config import RolloutConfig
from agentrl.json_values import JSONValueError, check_encodable, loads
from agentrl.rollout.chat import ParsedTurn
from agentrl.rollout.chat.reasoning import ReasoningMarkers
from agentrl.types import StopReason, Task, ToolCall, ToolResult, Trajectory, Turn


def _calls(message: dict[str, Any]) -> list[tuple[ToolCall, str | None]]:
    """The message's tool calls, each with an error message when its arguments are not a JSON object."""
    out = []
    for k, call in enumerate(message.get("tool_calls") or ()):
        function = call.get("function") or {}
        raw = function.get("arguments") or "{}"
        try:
            arguments = loads(raw) if isinstance(raw, str) else raw
            check_encodable(arguments)
            error = None if isinstance(arguments, dict) else "arguments must be a JSON object"
        except JSONValueError as e:
            arguments, error = {}, f"arguments are not JSON: {e}"
        call_id = call.get("id") or f"call_{k}"
        out.append((ToolCall(call_id, str(function.get("name") or ""), arguments if not error else {}), error))
    return out


async def run_chat_episode(
    scaffold: Any,
    task: Task,
    policy: Any,
    tools: Any,
    *,
    rollout: RolloutConfig,
    group_id: str,
    trajectory_id: str,
    seed: int,
) -> tuple[Trajectory, int, int]:
    """Play one episode; returns the trajectory and its (prompt, completion) token usage."""
    names = scaffold.tool_names(task)
    schemas = await tools.schemas(names)
    messages: list[dict[str, Any]] = scaffold.initial_messages(task)
    turns: list[Turn] = []
    usage = [0, 0]
    reason, answer, error = StopReason.MAX_TURNS, None, None
    measurements: dict[str, float] = {}
    session = None
    try:
        # Scaffolds that prepare a per-task environment (ReactScaffold's hooks) open and measure it themselves.
        opener = getattr(scaffold, "open_episode", None)
        session = await (opener(task, tools, names) if opener else tools.open_session(names))
        for k in range(rollout.max_turns):
            reply = await policy.chat(
                messages,
                schemas,
                temperature=rollout.temperature,
                top_p=rollout.top_p,
                max_tokens=rollout.max_new_tokens_per_turn,
                seed=(seed * 1009 + k) % 2**62,
            )
            usage[0] += reply.prompt_tokens
            usage[1] += reply.completion_tokens
            messages.append(reply.message)
            content = reply.message.get("content") or ""
            calls = _calls(reply.message)
            if not calls:
                turns.append(Turn((), (), (), content))
                if reply.finish_reason == "length":
                    reason = StopReason.MAX_TOKENS
                else:
                    reasoning, content = ReasoningMarkers().split(content)  # servers that leave <think> in content
                    parsed = ParsedTurn(content.strip(), (), reasoning=reasoning)
                    reason, answer = StopReason.ANSWERED, scaffold.extract_answer(parsed)
                break
            results = await asyncio.gather(
                *(session.call(call) if err is None else _bad_arguments(call, err) for call, err in calls)
            )
            limit = rollout.max_tool_output_chars
            for (call, _), result in zip(calls, results, strict=True):
                text = (
                    result.text
                    if len(result.text) <= limit
                    else f"{result.text[:limit]}\n[... truncated {len(result.text) - limit} characters]"
                )
                messages.append({"role": "tool", "tool_call_id": call.id, "name": call.name, "content": text})
            if images := image_message(calls, results):
                messages.append(images)
            turns.append(Turn((), (), (), content, tool_calls=tuple(c for c, _ in calls), tool_results=tuple(results)))
        if (finish := getattr(scaffold, "finish_episode", None)) is not None:
            measurements = dict(await finish(task, session))
    except Exception as e:  # the endpoint or the tool server failed: not the model's fault
        reason, answer, error = StopReason.INFRA_ERROR, None, f"{type(e).__name__}: {e}"
    finally:
        if session is not None:
            try:
                await session.close()
            except Exception:  # best effort; the server collects idle sessions
                pass
    trajectory = Trajectory(
        task_id=task.id,
        group_id=group_id,
        trajectory_id=trajectory_id,
        prompt_ids=(),
        turns=tuple(turns),
        stop_reason=reason,
        messages=tuple(messages),
        error=error,
        answer=answer,
        measurements=measurements if reason is not StopReason.INFRA_ERROR else {},
    )
    return trajectory, usage[0], usage[1]


def image_message(calls: list[tuple[ToolCall, str | None]], results: list[ToolResult]) -> dict[str, Any] | None:
    """A user message carrying the `image_url` parts of a round's tool results, each introduced by the call that
    returned it; None when no result has an image."""
    parts: list[dict[str, Any]] = []
    for (call, _), result in zip(calls, results, strict=True):
        images = [p for p in result.content if p.get("type") == "image_url"] if isinstance(result.content, list) else []
        if images:
            parts += [{"type": "text", "text": f"Image returned by {call.name} ({call.id}):"}, *images]
    return {"role": "user", "content": parts} if parts else None


async def _bad_arguments(call: ToolCall, message: str) -> ToolResult:
    return ToolResult.error(call.id, "bad_arguments", message)
