"""The FastAPI app of `agentrl serve` and the command's body.

Routes: `GET /health`, `GET /v1/models`, `POST /v1/chat/completions` (tools, tool_choice, stream, logprobs, n),
`POST /v1/completions` (token-id prompts). With a recorder (gateway mode) also `GET /v1/sessions`,
`GET /v1/sessions/{id}` and `POST /v1/sessions/{id}/reward` `{"reward": r, "episode"?: k, "turn"?: t}`.
A session is named by the `X-Session-Id` header, else by the bearer API key; `X-Agentrl-Group` names the group
(task) an episode belongs to, else the opening system and user messages do.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from agentrl.serve.chat_completions import ChatService
from agentrl.serve.recorder import SessionRecorder
from agentrl.serve.sampling import RequestError
from agentrl.serve.streaming import chunks


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


def create_app(service: ChatService) -> FastAPI:
    app = FastAPI(title="agentrl serve")
    started = time.time()

    @app.exception_handler(RequestError)
    async def request_error(_: Request, exc: RequestError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {
            "status": "ok",
            "models": list(service.model_names),
            "requests": service.requests,
            "recording": service.recorder is not None,
        }

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
        response = await service.chat(
            body, session_id=session_of(request), group=request.headers.get("x-agentrl-group")
        )
        if body.get("stream"):
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return StreamingResponse(chunks(response, include_usage=usage), media_type="text/event-stream")
        return response

    @app.post("/v1/completions")
    async def completions(request: Request) -> Any:
        return await service.completions(await _body(request))

    if service.recorder is not None:
        _gateway_routes(app, service.recorder)
    return app


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
) -> ChatService:
    """Load a checkpoint (`tiny`, a path, or a cached hub id) behind a `ChatService`."""
    from agentrl.config import PolicyConfig
    from agentrl.policy import load_model_and_tokenizer, resolve_model_path
    from agentrl.policy.transformers_policy import TransformersPolicy

    loaded, tokenizer = load_model_and_tokenizer(PolicyConfig(model=model, device=device), trainable=False)
    loaded.eval()
    policy = TransformersPolicy(loaded, tokenizer, max_batch_size=max_batch_size)
    recorder = SessionRecorder(tokenizer, record_dir) if (record or record_dir) else None
    names = tuple(dict.fromkeys([model, resolve_model_path(model)]))
    context = int(getattr(loaded.config, "max_position_embeddings", 4096))
    return ChatService(policy, names, recorder=recorder, context_tokens=context)


def serve_model(
    model: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    record: bool = False,
    record_dir: str | Path | None = None,
    device: str = "auto",
) -> None:
    """The body of `agentrl serve`: load the model and serve it until interrupted."""
    import uvicorn

    service = build_service(model, record=record, record_dir=record_dir, device=device)
    from agentrl.toolserver.app import KEEP_ALIVE_S

    uvicorn.run(create_app(service), host=host, port=port, log_level="warning", timeout_keep_alive=KEEP_ALIVE_S)
