"""Pre-run checks: what a run needs from this machine and the servers it names, checked in seconds before the
model loads.

`agentrl train` (`check_train`, from `Trainer.__init__`) and `agentrl eval` (`check_eval`) read the config and the
scaffold's `toolsets()` and check, without loading the model or opening a tool session:

- the sandbox, when a toolset runs model-written code (`uses_sandbox = True`) and the tools run in this process
  (with `tool_servers` the servers own their sandboxes): `bwrap` on PATH and able to start a throwaway sandbox
  (`sandbox.backend=local`; the same check and argv as the sandboxes themselves), or `E2B_API_KEY` (`e2b`);
- the browser, when a toolset drives one (the GUI toolset), in this process too;
- the tool servers named by `tool_servers`: each answers `GET /health` and accepts the token;
- the policy backend: vLLM installed for `policy.backend=vllm`, the server at `policy.base_url` answering
  `GET …/models` for `openai`; for `agentrl eval`, the endpoint at `base_url`;
- the experiment tracker: wandb installed for `logging.wandb=true`;
- the LLM judges among the rewards: each has a model, and its endpoint answers `GET …/models` (or, on a hosted
  provider, its API key is set);
- that the policy can see the scaffold's tools: a template that renders no tool schemas leaves it the tools it
  learned (`agentrl/doctor/tool_visibility.py`); seeing none of them is refused, some of them a warning.

A failure raises what the user acts on, with one line saying what is missing and what to do: `DependencyError`
(install something), `ConfigError` (change a setting), an `InfraError` (a server that did not answer). The local
checks run first; the probes then run at once, and the first failure in the order above is raised.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import importlib.util
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import httpx

from agentrl.errors import (
    ConfigError,
    DependencyError,
    InfraError,
    SamplerError,
    SandboxError,
    ToolServerError,
    ToolServerUnavailable,
    one_line,
)

if TYPE_CHECKING:
    from agentrl.config import EvalRunConfig, PolicyConfig, RunConfig
    from agentrl.sandbox.config import SandboxConfig
    from agentrl.toolserver.toolsets import Toolset

HTTP_TIMEOUT_S = 5.0
"""How long a server has to answer a probe (connecting included)."""
SANDBOX_TIMEOUT_S = 15.0
"""How long the throwaway sandbox has to run `python3 -c pass`."""
BROWSER_MODULE = "agentrl.tools.gui.browser"
SANDBOX_SETTING = "tool_server.sandbox.backend"

Probe = Callable[[httpx.AsyncClient], Awaitable[None]]


def check_train(config: RunConfig, scaffold: Any, rewards: Any = None) -> None:
    """Raise the first thing `agentrl train` with `config` lacks (blocking; seconds at most); `rewards` (a
    `RewardStack`) have their judges' endpoints checked."""
    if config.logging.wandb and importlib.util.find_spec("wandb") is None:
        from agentrl.runlog.wandb_sink import INSTALL_HINT

        raise DependencyError(INSTALL_HINT)
    if config.ray.enabled:
        from agentrl.distributed.cluster import require_ray

        require_ray()
    probes: list[Probe] = []
    if config.tool_servers:
        probes += [functools.partial(_check_tool_server, url, config.tool_server_token) for url in config.tool_servers]
    else:
        probes += check_toolsets(config.scaffold, scaffold, config.tool_server.sandbox)
    probes += check_policy(config.policy)
    probes += check_judges(rewards)
    _run_blocking(_run_probes(probes))
    if not config.tool_servers:  # the tools served elsewhere are the servers' to list
        from agentrl.doctor.tool_visibility import check_tool_visibility

        check_tool_visibility(config.policy, scaffold)


async def check_eval(config: EvalRunConfig, scaffold: Any) -> None:
    """Raise the first thing `agentrl eval` with `config` lacks: its tools run in this process, its model at
    `base_url` when one is given."""
    probes = check_toolsets(config.scaffold, scaffold, config.tool_server.sandbox)
    if config.base_url:
        probes.append(functools.partial(_check_endpoint, config.base_url, config.api_key, "--base-url", "--api-key"))
    await _run_probes(probes)


def check_toolsets(name: str, scaffold: Any, sandbox: SandboxConfig) -> list[Probe]:
    """Check at once what the scaffold's toolsets need in this process (the browser, a sandbox backend that is
    installed); returns the probe that starts a throwaway sandbox, when one is needed."""
    from agentrl.toolserver.toolsets import resolve_toolsets

    toolsets = resolve_toolsets(list(scaffold.toolsets()))
    _check_browser(name, toolsets)
    sandboxed = [t.label for t in toolsets if t.uses_sandbox]
    if not sandboxed:
        return []
    what = f"scaffold {name!r} runs model-written code in a sandbox ({', '.join(sandboxed)})"
    _check_sandbox_installed(what, sandbox)
    return [functools.partial(_check_bwrap_starts, what, sandbox)] if sandbox.backend == "local" else []


def check_policy(policy: PolicyConfig) -> list[Probe]:
    """Check at once what the policy backend needs installed or configured; returns the probe of its server."""
    from agentrl.policy.backends import choose_backend

    backend, _ = choose_backend(policy)
    if backend == "vllm":
        from agentrl.policy.vllm_environment import check_vllm_environment

        check_vllm_environment()
    if backend == "transformers":
        from agentrl.policy.loading import check_architecture

        check_architecture(policy)
    if backend != "openai":
        return []
    if not policy.base_url:
        raise ConfigError("policy.backend=openai needs policy.base_url (the server's URL, e.g. http://host:8000/v1)")
    return [functools.partial(_check_endpoint, policy.base_url, policy.api_key, "policy.base_url", "policy.api_key")]


def check_judges(rewards: Any) -> list[Probe]:
    """Every LLM judge of the reward stack has a model (`ConfigError` at once); a judge with a base URL gets a probe
    of `GET …/models`, one on a hosted provider a check of its API key in the environment (litellm's)."""
    from agentrl.judge import Judge

    probes: list[Probe] = []
    for reward, _ in getattr(rewards, "components", ()):
        judge = getattr(reward.fn, "__self__", None)
        if not isinstance(judge, Judge):
            continue
        model, base_url, api_key = judge.endpoint()
        if base_url:
            probes.append(functools.partial(_check_judge_endpoint, judge.name, base_url, api_key))
            continue
        from agentrl.policy.chat_policy import import_litellm

        missing = import_litellm().validate_environment(model=model).get("missing_keys") or []
        if missing:
            raise ConfigError(
                f"judge {judge.name} ({model}) needs {', '.join(missing)} in the environment, or a base URL "
                "(AGENTRL_JUDGE_BASE_URL) of an OpenAI-compatible server"
            )
    return probes


async def _check_judge_endpoint(name: str, base_url: str, api_key: str | None, client: httpx.AsyncClient) -> None:
    """The judge's OpenAI-compatible server answers `GET <base_url>/models` (any answer but a refused key)."""
    url = base_url.rstrip("/") + "/models"
    try:
        response = await client.get(url, headers={"Authorization": f"Bearer {api_key or 'none'}"})
    except (httpx.UnsupportedProtocol, httpx.InvalidURL) as e:
        raise ConfigError(f"judge {name}: base URL {base_url!r} is not an http(s) URL ({one_line(e)})") from None
    except httpx.HTTPError as e:
        why = f"{type(e).__name__}: {one_line(e)}" if str(e) else type(e).__name__
        raise InfraError(
            f"judge {name}'s endpoint {base_url} is not reachable (GET /models: {why}); start it, or fix its base "
            "URL (AGENTRL_JUDGE_BASE_URL)"
        ) from None
    if response.status_code in (401, 403):
        raise ConfigError(
            f"judge endpoint {base_url} refused the API key (HTTP {response.status_code} on GET /models): set "
            "AGENTRL_JUDGE_API_KEY, or the judge's api_key"
        )


# --- what runs in this process ------------------------------------------------------------------------------


def _check_browser(name: str, toolsets: Sequence[Toolset]) -> None:
    # A toolset class deriving from the GUI `Browser` has imported its module; an unloaded module means none does,
    # and the core need not import the tools collection to find that out.
    browser = getattr(sys.modules.get(BROWSER_MODULE), "Browser", None)
    users = [t.label for t in toolsets if browser is not None and t.cls is not None and issubclass(t.cls, browser)]
    if not users:
        return
    from agentrl.tools.gui.launcher import gui_unavailable_reason

    reason = gui_unavailable_reason()
    if reason is not None:
        raise DependencyError(f"scaffold {name!r} drives a browser ({', '.join(users)}), which cannot start: {reason}")


def _check_sandbox_installed(what: str, sandbox: SandboxConfig) -> None:
    from agentrl.sandbox.provider import SandboxProvider

    try:
        SandboxProvider(sandbox).check()
    except SandboxError as e:
        if sandbox.backend == "e2b":
            raise ConfigError(f"{what}, but {one_line(e)}") from None
        raise DependencyError(f"{what}, but {one_line(e)} (or set {SANDBOX_SETTING}=e2b)") from None


async def _check_bwrap_starts(what: str, sandbox: SandboxConfig, client: httpx.AsyncClient) -> None:
    """`bwrap` is there; whether it can start a sandbox here (user namespaces may be forbidden, as in many
    containers) only starting one tells."""
    from agentrl.sandbox.bwrap import BwrapBackend

    backend = BwrapBackend(sandbox)
    try:
        result = await backend.run_once("pass", timeout_s=SANDBOX_TIMEOUT_S)
    except (SandboxError, OSError) as e:
        raise DependencyError(f"{what}, but it cannot start here: {one_line(e)}") from None
    finally:
        await backend.close_all()
    if result.exit_code == 0:
        return
    stderr = [line.strip() for line in result.stderr.splitlines() if line.strip()]
    reason = stderr[-1] if stderr else f"exit code {result.exit_code}"
    if result.timed_out:
        reason = f"no answer within {SANDBOX_TIMEOUT_S:g} s"
    raise DependencyError(
        f"{what}, but bubblewrap cannot start one here ({reason}): allow unprivileged user namespaces "
        f"(run `bwrap --unshare-all --ro-bind / / true` to see why), or set {SANDBOX_SETTING}=e2b"
    )


# --- servers --------------------------------------------------------------------------------------------------


async def _check_tool_server(url: str, token: str | None, client: httpx.AsyncClient) -> None:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    health = await _get(client, url, "/health", headers, setting="tool_servers")
    if health.status_code != 200:
        raise ToolServerError(
            f"{url} answered GET /health with HTTP {health.status_code}, not as an agentrl tool server: "
            "check tool_servers",
            status_code=health.status_code,
        )
    # /health is open to anyone; a protected endpoint tells whether the token is the server's
    listing = await _get(client, url, "/tools", headers, setting="tool_servers")
    if listing.status_code in (401, 403):
        refused = "refused tool_server_token" if token else "requires a bearer token"
        raise ConfigError(
            f"tool server {url} {refused} (HTTP {listing.status_code}): set tool_server_token to the token it was "
            "started with"
        )


async def _check_endpoint(
    base_url: str, api_key: str | None, setting: str, key_setting: str, client: httpx.AsyncClient
) -> None:
    """The OpenAI-compatible server answers `GET <base_url>/models`; any answer but a refused key will do (some
    gateways serve only the completion routes)."""
    key = api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
    response = await _get(client, base_url, "/models", {"Authorization": f"Bearer {key}"}, setting=setting)
    if response.status_code in (401, 403):
        raise ConfigError(
            f"model server {base_url} ({setting}) refused the API key (HTTP {response.status_code} on GET /models): "
            f"pass the right one ({key_setting}, or $OPENAI_API_KEY)"
        )


async def _get(client: httpx.AsyncClient, base: str, path: str, headers: dict[str, str], *, setting: str) -> Any:
    """`GET base + path`; a server that cannot be reached raises, naming the setting that points at it."""
    tool_server = setting == "tool_servers"
    try:
        return await client.get(base.rstrip("/") + path, headers=headers)
    except (httpx.UnsupportedProtocol, httpx.InvalidURL) as e:
        raise ConfigError(f"{setting}: {base!r} is not an http(s) URL ({one_line(e)})") from None
    except httpx.HTTPError as e:
        why = f"{type(e).__name__}: {one_line(e)}" if str(e) else type(e).__name__
        if isinstance(e, httpx.TimeoutException):
            why += f", after {HTTP_TIMEOUT_S:g} s"
        what = f"tool server {base}" if tool_server else f"model server {base} ({setting})"
        error = ToolServerUnavailable if tool_server else SamplerError
        raise error(f"{what} is not reachable: GET {path} failed ({why}); start it, or fix {setting}") from None


# --- running --------------------------------------------------------------------------------------------------


async def _run_probes(probes: Sequence[Probe]) -> None:
    if not probes:
        return
    async with httpx.AsyncClient(timeout=HTTP_TIMEOUT_S) as client:
        outcomes = await asyncio.gather(*(probe(client) for probe in probes), return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome


def _run_blocking(checks: Awaitable[None]) -> None:
    """Run the probes to completion from synchronous code, on a loop of their own in a worker thread (the caller
    may own a loop, running or not, that must stay as it is)."""
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="agentrl-preflight") as pool:
        pool.submit(asyncio.run, checks).result()  # type: ignore[arg-type]
