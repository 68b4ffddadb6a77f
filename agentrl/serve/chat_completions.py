"""`/v1/chat/completions` and `/v1/completions` over a local policy, token-exact with the training template.

Chat requests are rendered with the checkpoint's chat template exactly as a scaffold renders its episodes
(`agentrl.rollout.chat.ChatFormat`, tool schemas included), sampled by the in-process policy (which batches
concurrent requests), and the sampled text is parsed in the model's tool-call format into OpenAI `tool_calls`. Each
response also carries the prompt and sampled token ids (`agentrl` field) so that nothing downstream has to
re-tokenize. In gateway mode the prompt comes from the session recorder instead (see `recorder.py`).

`tool_choice` (`tool_choice.py`): `auto` parses whatever calls the model wrote; `required` and a named function
force the call's opening markup (recorded as prompt, outside the loss mask); `none` keeps the model from writing a
call. `logprobs` / `top_logprobs`: `logprobs.py`. `stream: true` (`chat_stream`): token by token over a policy that
streams (`streaming.py`), the finished turn cut into chunks over any other; the sampled ids, and so the recorded
episode, are the same streamed or not.

Every request samples inside `gate` (a `SamplingGate`), so a weight update (`weights.py`) applies between requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from agentrl.policy.decode_loop import TokenStep
from agentrl.protocols import SamplingParams
from agentrl.rollout.chat import ChatFormat
from agentrl.serve.completions import text_completions
from agentrl.serve.forbidden_text import ForbiddenText
from agentrl.serve.forced_call import ForcedCalls, checked_call
from agentrl.serve.logprobs import content_logprobs, top_logprobs_of
from agentrl.serve.messages import reply_message, template_message, template_messages
from agentrl.serve.recorder import SessionRecorder
from agentrl.serve.sampling import RequestError, choices_of, sampling_params, stop_strings
from agentrl.serve.sampling_gate import SamplingGate
from agentrl.serve.streaming import DONE, StreamWriter, chunks, error_event
from agentrl.serve.tool_choice import ToolChoice, pick, tool_choice_of
from agentrl.types import Completion

Listener = Callable[[int, TokenStep], None]
"""Sees choice i's tokens as they are sampled."""


@dataclass
class ChatRequest:
    """A checked chat request: what to render, how to sample and read the turn, and where to record it."""

    body: dict[str, Any]
    model: str
    history: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    chat: ChatFormat
    tool_choice: ToolChoice
    """What `tool_choice` asks; for `required`, the call `pick` chose once sampling is about to start."""
    n: int
    top_logprobs: int
    session_id: str | None
    group: str | None


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
        self._forbidden: dict[tuple[str, ...], ForbiddenText] = {}
        self._forced = ForcedCalls(self.tokenizer, _vocab_size(policy))

    @property
    def streams_tokens(self) -> bool:
        """Whether the policy hands out tokens as it samples them (and reports alternatives, and forbids)."""
        return bool(getattr(self.policy, "streams_tokens", False))

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
        request = self._request(body, session_id, group)
        async with self.gate.sampling():
            return await self._run(request)

    async def chat_stream(
        self, body: dict[str, Any], *, session_id: str | None, group: str | None = None
    ) -> AsyncIterator[str]:
        """The SSE lines of a `stream: true` request. A request that cannot be answered raises before the first
        line (so it gets its 4xx); the gate (and in gateway mode the session) is held until the last."""
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        if not self.streams_tokens:
            response = await self.chat(body, session_id=session_id, group=group)
            for line in chunks(response, include_usage=include_usage):
                yield line
            return
        request = self._request(body, session_id, group)
        writer = StreamWriter(
            self.tokenizer,
            request.chat,
            model=request.model,
            n=request.n,
            parse_tools=request.tool_choice.parse_tools,
            stop=stop_strings(body),
            logprobs=bool(body.get("logprobs")),
            top_logprobs=request.top_logprobs,
            include_usage=include_usage,
            fingerprint=self._fingerprint(),
        )
        async with self.gate.sampling():
            steps: asyncio.Queue[tuple[int, TokenStep] | None] = asyncio.Queue()
            ready = asyncio.Event()
            run = asyncio.ensure_future(
                self._run(request, ready=ready.set, listen=lambda i, s: steps.put_nowait((i, s)))
            )
            run.add_done_callback(lambda _: steps.put_nowait(None))
            try:
                waiting = asyncio.ensure_future(ready.wait())
                await asyncio.wait({run, waiting}, return_when=asyncio.FIRST_COMPLETED)
                waiting.cancel()
                if not ready.is_set():
                    run.result()  # the request's error, before anything is sent
                for line in writer.opening(request.tool_choice.forced):
                    yield line
                while (item := await steps.get()) is not None:
                    for line in writer.token(*item):
                        yield line
                try:
                    response = run.result()
                except Exception as e:  # the status line is out: the error goes in the stream
                    yield error_event(e)
                    yield DONE
                    return
                for line in writer.finish(response):
                    yield line
            finally:
                if not run.done():
                    run.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await run

    def _request(self, body: dict[str, Any], session_id: str | None, group: str | None) -> ChatRequest:
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
        choice = tool_choice_of(body.get("tool_choice"), tools, chat)
        n = choices_of(body)
        if self.recorder is not None and session_id is not None and n != 1:
            raise RequestError("the recording gateway samples one choice per request (n=1)", param="n")
        top = top_logprobs_of(body)
        return ChatRequest(body, model, history, tools, chat, choice, n, top, session_id, group)

    async def _run(
        self, request: ChatRequest, *, ready: Callable[[], None] = lambda: None, listen: Listener | None = None
    ) -> dict[str, Any]:
        """Sample and read the request's choices (recording the turn in gateway mode); `ready()` once nothing but
        sampling can fail any more."""
        self.requests += 1
        if self.recorder is not None and request.session_id is not None:
            async with self.recorder.lock(request.session_id):
                pending = self.recorder.begin(request.session_id, request.history, request.tools, group=request.group)
                await self._pick(request, pending.prompt_ids)
                pending.force(request.tool_choice.forced_ids)
                params = self._params(request.body, len(pending.prompt_ids))
                ready()
                [completion], [steps] = await self._sample(request, pending.prompt_ids, [params], listen)
                choice, parsed = self._choice(request, 0, completion, params, steps)
                turn = self.recorder.finish(
                    pending,
                    completion,
                    parsed.tool_calls,
                    template_message(choice["message"]),
                    temperature=params.temperature,
                    parse_error=parsed.error,
                )
            extra = {
                "session_id": request.session_id,
                "episode_id": pending.episode.episode_id,
                "turn": turn,
                "mismatches": pending.episode.mismatches,
            }
            return self._response(request.model, [choice], pending.prompt_ids, [completion], extra)
        prompt_ids = request.chat.prompt_ids(request.history)
        await self._pick(request, prompt_ids)
        prompt_ids += request.tool_choice.forced_ids
        all_params = [self._params(request.body, len(prompt_ids), i) for i in range(request.n)]
        ready()
        completions, steps = await self._sample(request, prompt_ids, all_params, listen)
        choices = [
            self._choice(request, i, c, p, s)[0]
            for i, (c, p, s) in enumerate(zip(completions, all_params, steps, strict=True))
        ]
        return self._response(request.model, choices, prompt_ids, completions, {})

    async def _sample(
        self, request: ChatRequest, prompt_ids: list[int], params: list[SamplingParams], listen: Listener | None
    ) -> tuple[list[Completion], list[list[TokenStep] | None]]:
        """Sample every choice; the tokens' steps too when the policy streams them (they carry the alternatives
        `top_logprobs` asks for)."""
        if not self.streams_tokens:
            completions = await asyncio.gather(*(self.policy.generate(prompt_ids, p) for p in params))
            return list(completions), [None] * len(params)
        forbid = await self._forbid(request.tool_choice.forbidden)
        forced = await asyncio.to_thread(self._forced.get, request.tool_choice, request.chat, request.tools)
        forbid = forced or forbid  # a forced call's arguments are sampled to fit its tool's schema
        steps: list[list[TokenStep]] = [[] for _ in params]

        def listener(i: int) -> Callable[[TokenStep], None] | None:
            if listen is None and not request.top_logprobs:
                return None

            def on_token(step: TokenStep) -> None:
                steps[i].append(step)
                if listen is not None:
                    listen(i, step)

            return on_token

        completions = await asyncio.gather(
            *(
                self.policy.generate(
                    prompt_ids, p, on_token=listener(i), top_logprobs=request.top_logprobs, forbid=forbid
                )
                for i, p in enumerate(params)
            )
        )
        return list(completions), [s if s else None for s in steps]

    async def _pick(self, request: ChatRequest, prompt_ids: list[int]) -> None:
        """Settle which call `required` opens (the model's choice among the tools), before sampling."""
        params = self._params(request.body, len(prompt_ids))  # checks the request before any forward pass
        request.tool_choice = await pick(
            request.tool_choice, self.policy, prompt_ids, temperature=params.temperature, seed=params.seed
        )

    async def _forbid(self, texts: tuple[str, ...]) -> ForbiddenText | None:
        """The bans that keep `texts` out of the sample, worked out once per set (a pass over the vocabulary)."""
        if not texts:
            return None
        if texts not in self._forbidden:
            self._forbidden[texts] = await asyncio.to_thread(ForbiddenText, self.tokenizer, texts)
        return self._forbidden[texts]

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
        request: ChatRequest,
        index: int,
        completion: Completion,
        params: SamplingParams,
        steps: list[TokenStep] | None,
    ):
        chat, parse_tools = request.chat, request.tool_choice.parse_tools
        text = completion.text
        if completion.finish_reason == "tool_call":  # a request stop string ended generation; OpenAI drops it
            text = next((text[: -len(s)] for s in params.stop if text.endswith(s)), text)
        text = request.tool_choice.forced + text
        parsed = chat.parse(text, id_prefix=f"call_{uuid.uuid4().hex[:8]}")
        parsed = checked_call(parsed, request.tool_choice, request.tools)  # forced calls fit their schema, or fail
        message = reply_message(parsed, chat.content_of(text), parse_tools=parse_tools)
        if completion.finish_reason == "length":
            finish = "length"
        else:
            finish = "tool_calls" if message.get("tool_calls") else "stop"
        choice: dict[str, Any] = {"index": index, "message": message, "finish_reason": finish, "logprobs": None}
        if request.body.get("logprobs"):
            logprobs = content_logprobs(self.tokenizer, completion, steps, request.top_logprobs)
            choice["logprobs"] = {"content": logprobs}
        return choice, parsed

    def _fingerprint(self) -> str:
        return f"agentrl-v{getattr(self.policy, 'version', 0)}"

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
            "system_fingerprint": self._fingerprint(),
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
        model = self.check_model(body)
        async with self.gate.sampling():
            return await text_completions(self.policy, body, model, lambda tokens, i: self._params(body, tokens, i))


def _vocab_size(policy: Any) -> int | None:
    """Rows of the model's output layer (padded past the tokenizer's ids in many checkpoints)."""
    size = getattr(getattr(getattr(policy, "model", None), "config", None), "vocab_size", None)
    return size if isinstance(size, int) else None
