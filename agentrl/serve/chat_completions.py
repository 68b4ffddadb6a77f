"""`/v1/chat/completions` and `/v1/completions` over a local policy, token-exact with the training template.

Chat requests are rendered with the checkpoint's chat template exactly as a scaffold renders its episodes
(`agentrl.rollout.chat.ChatFormat`, tool schemas included), sampled by the in-process policy (which batches
concurrent requests), and the sampled text is parsed for `<tool_call>` markup into OpenAI `tool_calls`. Each
response also carries the prompt and sampled token ids (`agentrl` field) so that nothing downstream has to
re-tokenize. In gateway mode the prompt comes from the session recorder instead (see `recorder.py`).

`tool_choice`: `none` returns the raw text, `auto` (the default) parses whatever calls the model wrote;
`required` and a named function force a call by appending its opening markup (`<tool_call>` and, for a named
function, `{"name": "...", "arguments": `) to the prompt, as vLLM's guided decoding would constrain it. The
forced ids are part of the prompt, not of the sampled turn: they carry no logprobs, and the gateway records them
as prompt (outside the loss mask).

`/v1/completions` takes prompts as token ids and, with `return_tokens_as_token_ids` (the vLLM extension),
reports sampled tokens as `token_id:N`: the protocol of `agentrl.policy.openai_policy.OpenAICompletionsPolicy`.

Every request samples inside `gate` (a `SamplingGate`), so a weight update (`weights.py`) applies between requests.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from agentrl.protocols import SamplingParams
from agentrl.rollout.chat import ChatFormat
from agentrl.serve.messages import reply_message, template_message, template_messages
from agentrl.serve.recorder import SessionRecorder
from agentrl.serve.sampling import RequestError, choices_of, sampling_params
from agentrl.serve.sampling_gate import SamplingGate
from agentrl.types import Completion


class ChatService:
    """Answers OpenAI chat and completions requests with one local policy."""

    def __init__(
        self,
        policy: Any,
        model_names: tuple[str, ...],
        *,
        recorder: SessionRecorder | None = None,
        context_tokens: int = 4096,
        default_max_tokens: int = 512,
    ):
        self.policy = policy
        self.tokenizer = policy.tokenizer
        self.model_names = model_names
        self.recorder = recorder
        self.context_tokens = context_tokens
        self.default_max_tokens = default_max_tokens
        self.requests = 0
        self.gate = SamplingGate()
        self.weights: Any = None  # a WeightUpdater over a real model; None (no weight routes) over a scripted one

    def check_model(self, body: dict[str, Any]) -> str:
        model = body.get("model")
        if model not in self.model_names:
            raise RequestError(
                f"model {model!r} is not served here; served: {', '.join(self.model_names)}",
                status=404,
                code="model_not_found",
                param="model",
            )
        return model

    # --- chat ------------------------------------------------------------------------------------------

    async def chat(self, body: dict[str, Any], *, session_id: str | None, group: str | None = None) -> dict[str, Any]:
        async with self.gate.sampling():
            return await self._chat(body, session_id=session_id, group=group)

    async def _chat(self, body: dict[str, Any], *, session_id: str | None, group: str | None) -> dict[str, Any]:
        model = self.check_model(body)
        messages = body.get("messages")
        if (
            not isinstance(messages, list)
            or not messages
            or not all(isinstance(m, dict) and "role" in m for m in messages)
        ):
            raise RequestError("messages must be a non-empty list of {role, content} objects", param="messages")
        try:
            history = template_messages(messages)
        except (KeyError, TypeError) as e:
            raise RequestError(f"malformed message: {e}", param="messages") from e
        tools = body.get("tools") or None
        chat = ChatFormat.of(self.policy, tools)
        parse_tools = body.get("tool_choice") != "none"
        forced = forced_call_prefix(body.get("tool_choice"), tools, chat)
        forced_ids = self.tokenizer.encode(forced, add_special_tokens=False) if forced else []
        n = choices_of(body)
        self.requests += 1
        if self.recorder is not None and session_id is not None:
            if n != 1:
                raise RequestError("the recording gateway samples one choice per request (n=1)", param="n")
            async with self.recorder.lock(session_id):
                pending = self.recorder.begin(session_id, history, tools, group=group)
                pending.force(forced_ids)
                params = self._params(body, len(pending.prompt_ids))
                completion = await self.policy.generate(pending.prompt_ids, params)
                choice, parsed = self._choice(chat, 0, completion, params, parse_tools, body, forced)
                turn = self.recorder.finish(
                    pending,
                    completion,
                    parsed.tool_calls,
                    template_message(choice["message"]),
                    temperature=params.temperature,
                    parse_error=parsed.error,
                )
            extra = {
                "session_id": session_id,
                "episode_id": pending.episode.episode_id,
                "turn": turn,
                "mismatches": pending.episode.mismatches,
            }
            return self._response(model, [choice], pending.prompt_ids, [completion], extra)
        prompt_ids = chat.prompt_ids(history) + forced_ids
        params = [self._params(body, len(prompt_ids), i) for i in range(n)]
        completions = await asyncio.gather(*(self.policy.generate(prompt_ids, p) for p in params))
        choices = [
            self._choice(chat, i, c, p, parse_tools, body, forced)[0]
            for i, (c, p) in enumerate(zip(completions, params, strict=False))
        ]
        return self._response(model, choices, prompt_ids, completions, {})

    def _params(self, body: dict[str, Any], prompt_tokens: int, choice: int = 0) -> SamplingParams:
        return sampling_params(
            body,
            prompt_tokens=prompt_tokens,
            context_tokens=self.context_tokens,
            default_max_tokens=self.default_max_tokens,
            choice=choice,
        )

    def _choice(
        self,
        chat: ChatFormat,
        index: int,
        completion: Completion,
        params: SamplingParams,
        parse_tools: bool,
        body: dict[str, Any],
        forced: str = "",
    ):
        text = completion.text
        if completion.finish_reason == "tool_call":  # a request stop string ended generation; OpenAI drops it
            text = next((text[: -len(s)] for s in params.stop if text.endswith(s)), text)
        text = forced + text
        parsed = chat.parse(text, id_prefix=f"call_{uuid.uuid4().hex[:8]}")
        message = reply_message(parsed, chat.content_of(text), parse_tools=parse_tools)
        if completion.finish_reason == "length":
            finish = "length"
        else:
            finish = "tool_calls" if message.get("tool_calls") else "stop"
        choice: dict[str, Any] = {"index": index, "message": message, "finish_reason": finish, "logprobs": None}
        if body.get("logprobs"):
            choice["logprobs"] = {"content": self._logprobs(completion)}
        return choice, parsed

    def _logprobs(self, completion: Completion) -> list[dict[str, Any]]:
        """Per sampled token (the end-of-turn token included: training scores it). Only the sampled token's
        logprob is known, so `top_logprobs` lists just that token."""
        out = []
        for token_id, logprob in zip(completion.token_ids, completion.logprobs, strict=False):
            token = self.tokenizer.decode([token_id], skip_special_tokens=False)
            entry = {"token": token, "logprob": logprob, "bytes": list(token.encode())}
            out.append({**entry, "top_logprobs": [dict(entry)]})
        return out

    def _response(
        self,
        model: str,
        choices: list[dict[str, Any]],
        prompt_ids: list[int],
        completions: list[Completion],
        extra: dict[str, Any],
    ) -> dict[str, Any]:
        sampled = sum(len(c.token_ids) for c in completions)
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": choices,
            "system_fingerprint": f"agentrl-v{getattr(self.policy, 'version', 0)}",
            "usage": {
                "prompt_tokens": len(prompt_ids),
                "completion_tokens": sampled,
                "total_tokens": len(prompt_ids) + sampled,
            },
            "agentrl": {
                "prompt_token_ids": list(prompt_ids),
                "token_ids": [list(c.token_ids) for c in completions],
                "policy_version": getattr(self.policy, "version", 0),
                **extra,
            },
        }

    # --- completions over token ids --------------------------------------------------------------------

    async def completions(self, body: dict[str, Any]) -> dict[str, Any]:
        async with self.gate.sampling():
            return await self._completions(body)

    async def _completions(self, body: dict[str, Any]) -> dict[str, Any]:
        model = self.check_model(body)
        prompt = body.get("prompt")
        if isinstance(prompt, str):
            prompt = list(self.tokenizer(prompt, add_special_tokens=False)["input_ids"])
        if not isinstance(prompt, list) or not prompt or not all(isinstance(t, int) for t in prompt):
            raise RequestError("prompt must be a string or a non-empty list of token ids", param="prompt")
        n = choices_of(body)
        params = [self._params(body, len(prompt), i) for i in range(n)]
        completions = await asyncio.gather(*(self.policy.generate(prompt, p) for p in params))
        as_ids = bool(body.get("return_tokens_as_token_ids"))
        choices = []
        for i, c in enumerate(completions):
            ids = list(c.token_ids)
            tokens = [f"token_id:{t}" if as_ids else self.tokenizer.decode([t]) for t in ids]
            keep_special = body.get("skip_special_tokens") is False
            choices.append(
                {
                    "index": i,
                    "text": self.tokenizer.decode(ids, skip_special_tokens=not keep_special),
                    "finish_reason": "length" if c.finish_reason == "length" else "stop",
                    "logprobs": None
                    if body.get("logprobs") is None
                    else {
                        "tokens": tokens,
                        "token_logprobs": list(c.logprobs),
                        "top_logprobs": [{t: lp} for t, lp in zip(tokens, c.logprobs, strict=False)],
                        "text_offset": [0] * len(ids),
                    },
                }
            )
        sampled = sum(len(c.token_ids) for c in completions)
        return {
            "id": f"cmpl-{uuid.uuid4().hex}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": model,
            "choices": choices,
            "usage": {
                "prompt_tokens": len(prompt),
                "completion_tokens": sampled,
                "total_tokens": len(prompt) + sampled,
            },
        }


def forced_call_prefix(tool_choice: Any, tools: list[dict[str, Any]] | None, chat: ChatFormat) -> str:
    """The markup a `tool_choice` forces the reply to start with, in the model's tool-call format ("" for `auto`,
    `none` or no choice); a generation prompt that opened a reasoning block gets it closed first."""
    if tool_choice in (None, "auto", "none"):
        return ""
    if not tools:
        raise RequestError("tool_choice requires tools", param="tool_choice")
    closing = f"{chat.reasoning.close}\n\n" if chat.reasoning is not None and chat.prompt_opens_reasoning else ""
    if tool_choice == "required":
        return closing + chat.tool_format.forced_prefix()
    name = tool_choice.get("function", {}).get("name") if isinstance(tool_choice, dict) else None
    if not isinstance(name, str):
        raise RequestError(
            "tool_choice must be 'none', 'auto', 'required' or {'type': 'function', 'function': {'name': ...}}",
            param="tool_choice",
        )
    known = [t.get("function", {}).get("name") for t in tools]
    if name not in known:
        raise RequestError(f"tool_choice names {name!r}, which is not among the tools", param="tool_choice")
    return closing + chat.tool_format.forced_prefix(name)
