"""The FastAPI app of `agentrl serve` and the command's body.

Routes: `GET /health`, `GET /v1/models`, `POST /v1/chat/completions` (tools, tool_choice, stream, logprobs, n),
`POST /v1/completions` (token-id prompts). With a recorder (gateway mode) also `GET /v1/sessions`,
`GET /v1/sessions/{id}` and `POST /v1/sessions/{id}/reward` `{"reward": r, "episode"?: k, "turn"?: t}`.
A session is named by the `X-Session-Id` header, else by the bearer API key; `X-Agentrl-Group` names the group
(task) an episode belongs to, else the opening system and user messages do.
Over a real model also `GET /admin/weights` (capability, weight version) and `POST /admin/weights` (a weight update,
authenticated with the weights token): see `weights.py`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from agentrl.serve.chat_completions import ChatService
from agentrl.serve.recorder import SessionRecorder
from agentrl.serve.sampling import RequestError
from agentrl.serve.weights import OFF_BY_FLAG, WEIGHTS_ROUTE, WeightUpdater


def session_of(request: Request) -> str | None:
    header = request.headers.get("x-session-id")
    if header:
        return header
    auth = request.headers.get("authorization", "")
    return auth.removeprefix("Bearer ").strip() or None if auth.startswith("Bearer ") else None


async def _body(request: Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError as e:
        raise RequestError("the request body is not JSON") from e
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object")
    return body


async def _prepended(first: str, rest: AsyncIterator[str]) -> AsyncIterator[str]:
    try:
        yield first
        async for line in rest:
            yield line
    finally:
        await rest.aclose()  # a client that went away ends the sampling and frees the gate


def create_app(service: ChatService) -> FastAPI:
    app = FastAPI(title="agentrl serve")
    started = time.time()

    @app.exception_handler(RequestError)
    async def request_error(_: Request, exc: RequestError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return JSONResponse(exc.body(), status_code=exc.status, headers=headers)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        out = {
            "status": "ok",
            "models": list(service.model_names),
            "requests": service.requests,
            "recording": service.recorder is not None,
        }
        if service.weights is not None:
            out["weight_version"] = service.weights.version
        return out

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {
            "object": "list",
            "data": [
                {"id": name, "object": "model", "created": int(started), "owned_by": "agentrl"}
                for name in service.model_names
            ],
        }

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Any:
        body = await _body(request)
        session, group = session_of(request), request.headers.get("x-agentrl-group")
        if not body.get("stream"):
            return await service.chat(body, session_id=session, group=group)
        lines = service.chat_stream(body, session_id=session, group=group)
        try:
            first = await anext(lines)  # a request that cannot be answered fails here, with its status
        except BaseException:
            await lines.aclose()
            raise
        return StreamingResponse(_prepended(first, lines), media_type="text/event-stream")

    @app.post("/v1/completions")
    async def completions(request: Request) -> Any:
        return await service.completions(await _body(request))

    if service.recorder is not None:
        _gateway_routes(app, service.recorder)
    if service.weights is not None:
        _weight_routes(app, service.weights)
    return app


def _weight_routes(app: FastAPI, weights: WeightUpdater) -> None:
    @app.get(WEIGHTS_ROUTE)
    async def capability(request: Request) -> dict[str, Any]:
        return weights.capability(request.headers.get("authorization"))

    @app.post(WEIGHTS_ROUTE)
    async def update(request: Request) -> dict[str, Any]:
        weights.authorize(request.headers.get("authorization"))  # before reading a byte of the body
        kind = request.headers.get("content-type", "").split(";")[0].strip()
        if kind == "application/json":
            path = (await _body(request)).get("path")
            if not isinstance(path, str) or not path:
                raise RequestError('a JSON update names a safetensors file or directory: {"path": ...}', param="path")
            tensors = await asyncio.to_thread(weights.read_path, path)
        elif kind == "application/octet-stream":
            tensors = weights.read_bytes(await request.body())
        else:
            raise RequestError(
                'send application/json {"path": ...} or application/octet-stream safetensors bytes',
                status=415,
                code="unsupported_media_type",
            )
        return await weights.apply(tensors)


def _gateway_routes(app: FastAPI, recorder: SessionRecorder) -> None:
    @app.get("/v1/sessions")
    async def sessions() -> dict[str, Any]:
        return {
            "sessions": [
                {
                    "session_id": sid,
                    "episodes": len(s.episodes),
                    "turns": sum(len(e.turns) for e in s.episodes),
                    "mismatches": sum(len(e.mismatches) for e in s.episodes),
                }
                for sid, s in recorder.sessions.items()
            ]
        }

    @app.get("/v1/sessions/{session_id}")
    async def session(session_id: str) -> dict[str, Any]:
        episodes = recorder.episodes(session_id)
        if not episodes:
            raise RequestError(f"no recorded session {session_id!r}", status=404, code="not_found")
        return {"session_id": session_id, "episodes": [e.to_json() for e in episodes]}

    @app.post("/v1/sessions/{session_id}/reward")
    async def reward(session_id: str, request: Request) -> dict[str, Any]:
        body = await _body(request)
        value = body.get("reward")
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise RequestError("reward must be a number", param="reward")
        try:
            episode = recorder.set_reward(session_id, float(value), episode=body.get("episode"), turn=body.get("turn"))
        except KeyError as e:
            raise RequestError(str(e.args[0]), status=404, code="not_found") from e
        except (IndexError, TypeError) as e:
            raise RequestError(f"no such episode or turn: {e}", param="turn") from e
        return {
            "episode_id": episode.episode_id,
            "reward": episode.reward,
            "turn_rewards": [t.reward for t in episode.turns],
        }


def build_service(
    model: str,
    *,
    record_dir: str | Path | None = None,
    record: bool = False,
    device: str = "auto",
    max_batch_size: int = 64,
    weights_token: str | None = None,
    weight_updates: bool = True,
    tool_parser: str = "auto",
    chat_template: str | None = None,
    enable_thinking: bool | None = None,
) -> ChatService:
    """Load a checkpoint (`tiny`, a path, or a cached hub id) behind a `ChatService`. Weight updates are on when
    `weight_updates` and a `weights_token` is given."""
    from agentrl.config import PolicyConfig
    from agentrl.policy import load_model_and_tokenizer, resolve_model_path
    from agentrl.policy.backends import chat_settings
    from agentrl.policy.transformers_policy import TransformersPolicy

    chat = {"tool_parser": tool_parser, "chat_template": chat_template, "enable_thinking": enable_thinking}
    config = PolicyConfig(model=model, device=device, **chat)
    loaded, tokenizer = load_model_and_tokenizer(config, trainable=False)
    loaded.eval()
    settings = chat_settings(config, tokenizer, loaded)
    policy = TransformersPolicy(loaded, tokenizer, max_batch_size=max_batch_size, eos_token_ids=settings.eos_token_ids)
    policy.chat_settings = settings
    recorder = SessionRecorder(tokenizer, record_dir, settings=settings) if (record or record_dir) else None
    names = tuple(dict.fromkeys([model, resolve_model_path(model)]))
    context = int(getattr(loaded.config, "max_position_embeddings", 4096))
    service = ChatService(policy, names, recorder=recorder, context_tokens=context)
    token = weights_token if weight_updates else None
    service.weights = WeightUpdater(
        policy, service.gate, token=token, off_reason=None if weight_updates else OFF_BY_FLAG
    )
    return service


def serve_model(
    model: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    record: bool = False,
    record_dir: str | Path | None = None,
    device: str = "auto",
    weights_token: str | None = None,
    weight_updates: bool = True,
    **chat: Any,
) -> None:
    """The body of `agentrl serve`: load the model and serve it until interrupted (`chat`: the chat settings of
    `build_service`)."""
    import uvicorn

    service = build_service(
        model,
        record=record,
        record_dir=record_dir,
        device=device,
        weights_token=weights_token,
        weight_updates=weight_updates,
        **chat,
    )
    from agentrl.toolserver.app import KEEP_ALIVE_S

    uvicorn.run(create_app(service), host=host, port=port, log_level="warning", timeout_keep_alive=KEEP_ALIVE_S)
