"""`agentrl serve-tools` and `agentrl serve`: the tool server and the OpenAI-compatible model server."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agentrl.cli.train import MODEL_HELP, TOOL_PARSER_HELP

serve_app = typer.Typer()


@serve_app.command("serve-tools")
def serve_tools(
    tools: Annotated[
        str | None, typer.Option(help="Comma-separated toolset names or import paths (default: echo, without --mcp).")
    ] = None,
    mcp: Annotated[
        list[str] | None,
        typer.Option(
            "--mcp",
            help="Serve an MCP server's tools, repeatable: a command (`python server.py`; every session starts its "
            "own process) or a streamable-HTTP URL (`http://host:port/mcp`; every session its own MCP session).",
        ),
    ] = None,
    mcp_prefix: Annotated[
        list[str] | None,
        typer.Option(
            "--mcp-prefix",
            help="Put this before the tool names of the --mcp at the same position (`fs_`; '' for none); give one "
            "per --mcp.",
        ),
    ] = None,
    mcp_sessions: Annotated[
        str,
        typer.Option(
            "--mcp-sessions",
            help="How sessions reach each --mcp server: `per_session` (a process or MCP session each: isolated state), "
            "`shared` (one for all: stateless tools, no start-up per session) or `auto` (shared when the server "
            "annotates every tool read-only).",
        ),
    ] = "auto",
    host: Annotated[str, typer.Option(help="Bind address (loopback by default).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (the first one with --replicas).")] = 8000,
    token: Annotated[
        str | None,
        typer.Option(envvar="AGENTRL_TOOL_SERVER_TOKEN", help="Require `Authorization: Bearer TOKEN`."),
    ] = None,
    replicas: Annotated[
        int,
        typer.Option(
            min=1,
            help="Start this many server processes on consecutive ports and print their URLs (give them all to "
            "the client: `tool_servers=URL,URL`). Not one port with several workers: session state lives in "
            "one process, and workers sharing a port could not keep a session's requests on it.",
        ),
    ] = 1,
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", help="TOML file of server limits and sandbox settings (ToolServerConfig)."),
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="Override one setting, repeatable: `max_sessions=512`, `sandbox.memory_mb=4096`, "
            "`sandbox.allow_network=true`, `sandbox.backend=e2b` (see `agentrl serve-tools --settings`).",
        ),
    ] = None,
    settings: Annotated[bool, typer.Option("--settings", help="List every setting with its default and exit.")] = False,
) -> None:
    """Serve toolsets, and the tools of MCP servers, over the agentrl tool-server HTTP API."""
    from agentrl.config import field_docs, load_config
    from agentrl.errors import ConfigError
    from agentrl.registry import TOOLSETS
    from agentrl.toolserver.app import serve
    from agentrl.toolserver.config import ToolServerConfig

    if settings:
        for key, default, doc in field_docs(ToolServerConfig):
            typer.echo(f"{key} = {default}\n    {doc}")
        return
    overrides = list(set_ or [])
    server_config = load_config(config, overrides, cls=ToolServerConfig)
    tools = tools if tools is not None or mcp else "echo"
    if replicas > 1:
        if mcp:
            raise ConfigError("--mcp does not combine with --replicas: start one `serve-tools --mcp` per port")
        _serve_tool_replicas(
            tools, host=host, port=port, token=token, replicas=replicas, config=config, overrides=overrides
        )
        return
    specs: list[object] = [TOOLSETS.get(t.strip(), t.strip()) for t in (tools or "").split(",") if t.strip()]
    specs += _mcp_toolsets(mcp or [], mcp_prefix, mcp_sessions)
    serve(specs, host=host, port=port, token=token, config=server_config)


def _mcp_toolsets(servers: list[str], prefixes: list[str] | None, sessions: str = "auto") -> list[type]:
    from agentrl.errors import ConfigError
    from agentrl.toolserver.mcp_toolset import mcp_toolset

    if prefixes is not None and len(prefixes) != len(servers):
        raise ConfigError(f"give one --mcp-prefix per --mcp ('' for none): {len(prefixes)} for {len(servers)}")
    prefixes = prefixes if prefixes is not None else [""] * len(servers)
    return [
        mcp_toolset(server, prefix=prefix, sessions=sessions) for server, prefix in zip(servers, prefixes, strict=True)
    ]


def _serve_tool_replicas(
    tools: str,
    *,
    host: str,
    port: int,
    token: str | None,
    replicas: int,
    config: Path | None,
    overrides: list[str],
) -> None:
    import signal

    from agentrl.errors import InfraError, one_line
    from agentrl.toolserver.replicas import ToolServerReplicas

    def stop_on_sigterm(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop_on_sigterm)
    servers = ToolServerReplicas(
        tools, replicas=replicas, host=host, port=port, token=token, config=config, overrides=overrides
    )
    try:
        for url, process in zip(servers.start(), servers.processes, strict=True):
            typer.echo(f"tool server {url} (pid {process.pid})")
        typer.echo(f"tool_servers={','.join(servers.urls)}")
        code = servers.wait()
    except (InfraError, TimeoutError) as e:  # a replica did not start (port taken, bad toolset, ...)
        typer.secho(f"error: {one_line(e)}", fg="red", err=True)
        code = 2
    except KeyboardInterrupt:
        code = 0
    finally:
        servers.stop()
    raise typer.Exit(code)


@serve_app.command()
def serve(
    model: Annotated[str, typer.Option(help=MODEL_HELP)] = "tiny",
    host: Annotated[str, typer.Option(help="Bind address (loopback by default).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 8000,
    record: Annotated[bool, typer.Option(help="Gateway mode: record sessions as token-exact trajectories.")] = False,
    record_dir: Annotated[Path | None, typer.Option(help="Append recorded episodes to DIR/sessions.jsonl.")] = None,
    device: Annotated[str, typer.Option(help="Torch device: auto, cpu, cuda, …")] = "auto",
    weights_token: Annotated[
        str | None,
        typer.Option(
            envvar="AGENTRL_WEIGHTS_TOKEN",
            show_envvar=True,
            help="Accept weight updates (`POST /admin/weights` with `Authorization: Bearer TOKEN`): "
            "`agentrl train policy.backend=openai policy.weight_sync_token=TOKEN` pushes its weights after every "
            "step. Without a token the endpoint is off, and training against this server is refused unless "
            "`policy.off_policy=true`.",
        ),
    ] = None,
    weight_updates: Annotated[
        bool,
        typer.Option(
            "--weight-updates/--no-weight-updates",
            help="`--no-weight-updates` turns the weight-update endpoint off even when a token is set.",
        ),
    ] = True,
    tool_parser: Annotated[str, typer.Option(help=TOOL_PARSER_HELP)] = "auto",
    chat_template: Annotated[Path | None, typer.Option(help="A Jinja chat template file to use instead.")] = None,
    thinking: Annotated[bool | None, typer.Option("--thinking/--no-thinking", help="Pass enable_thinking.")] = None,
) -> None:
    """Serve a local checkpoint over an OpenAI-compatible API (chat with tools, token-id completions).

    Chat streams token by token (`stream: true`), reports `top_logprobs` and enforces `tool_choice`
    (docs/model_server.md). Weight updates from a trainer (`/admin/weights`) are off unless --weights-token is set.
    """
    from agentrl.policy.loading import resolve_model_path
    from agentrl.serve.app import serve_model

    resolve_model_path(model)  # a checkpoint that is not there fails before the server says it is serving it
    recording = " (recording sessions)" if record or record_dir else ""
    updates = "on" if weights_token and weight_updates else "off"
    typer.echo(f"serving {model} on http://{host}:{port}/v1{recording}; weight updates {updates}")
    serve_model(
        model,
        host=host,
        port=port,
        record=record,
        record_dir=record_dir,
        device=device,
        weights_token=weights_token,
        weight_updates=weight_updates,
        tool_parser=tool_parser,
        chat_template=str(chat_template) if chat_template else None,
        enable_thinking=thinking,
    )
