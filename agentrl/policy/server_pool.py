"""`ServerPool`: the inference servers of `policy.base_url` behind one sampler, and which of them serves a request.

`policy.base_url` may name several OpenAI-compatible servers of the same model (`http://a:8000/v1,http://b:8000/v1`).
The pool routes each request:

- a request that continues a trajectory goes to the server that served the trajectory's first turn, whose prefix
  (KV) cache holds the history the request extends (a *sticky hit*);
- a new trajectory goes to the server with the fewest requests in flight, ties taken in turn;
- a server that fails a request (unreachable, timed out, HTTP 5xx, or answering from weights other than those the
  pool last pushed to it) is marked down for `down_for_s`. New trajectories avoid it; afterwards its `/health` is
  asked again and it takes new trajectories once it answers, holding the weight version the pool expects of it (a
  server that restarted holds its initial weights, and waits for the next weight update).

What identifies a trajectory. The `Policy` protocol passes prompt ids and sampling parameters, nothing else: no
session or trajectory id reaches `generate`. But every trajectory runs in an asyncio task of its own
(`agentrl/rollout/collect.py`), and by the token-exact rule each of its prompts extends the previous prompt by what
was sampled (plus the observation after it). So the pool keeps, in a context variable of the calling task, the
server of its last request and the ids that request ended with; a prompt that extends those ids continues that
trajectory. Anything else starts a new one: another task, or the next episode run in the same task. A branch forked
from a trajectory (ARPO/AEPO) runs in a task created inside its parent's, so it inherits the parent's entry and
stays on the parent's server, where their shared prefix is cached.

Failures. When the first request of a trajectory fails on its server, the pool sends it to the next server: nothing
has been sampled yet, so that is exactly the trajectory starting there. A later request is never moved: its server
failing it (answering from the wrong weights included) fails the trajectory with a `SamplerError`, which the episode
records as `StopReason.INFRA_ERROR` (never a zero reward), as does any later request of a trajectory whose server is
marked down. The ids would carry over token-exactly (prompts travel as ids, and every server holds the same weights),
but the request that failed may be what brought its server down (a long context exhausting its memory), and
replaying it on the others could take them down in turn; and a server found on other weights than the pool pushed
may have sampled the earlier turns from them too.

`PoolStats` counts, per collect, what the trainer logs as `rollout/server_*`.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeVar

from agentrl.errors import ConfigError, SamplerError
from agentrl.types import Completion

T = TypeVar("T")
DOWN_FOR_S = 10.0
PROBE_TIMEOUT_S = 5.0
_FINGERPRINT = re.compile(r"agentrl-v(\d+)")

_last_request: ContextVar[Mapping[int, tuple[int, tuple[int, ...]]]] = ContextVar(
    "agentrl_pool_last", default=MappingProxyType({})
)
"""Per pool (its key): the index of the server of this task's last request, and the ids that request ended with."""
_pool_keys = itertools.count()


def server_urls(base_url: str | Sequence[str] | None) -> tuple[str, ...]:
    """One URL per server: a comma-separated string split, a sequence as given; empty for None."""
    items = base_url.split(",") if isinstance(base_url, str) else list(base_url or ())
    return tuple(u.strip().rstrip("/") for u in items if u and u.strip())


class ServerFault(Exception):
    """Raised by a request's sender when the server answered but cannot be trusted (wrong weights): the pool
    treats it as the server failing."""


@dataclass(eq=False)
class Server:
    """One server of the pool and what the pool knows of it."""

    url: str
    client: Any
    """The OpenAI client of this server."""
    in_flight: int = 0
    down_until: float | None = None
    """Monotonic time until which the server counts as down; None: up. Past it, `/health` decides."""
    down_reason: str = ""
    expected_version: int | None = None
    """The weight version the pool last pushed to it, when the server reports one (`agentrl serve`)."""

    @property
    def root(self) -> str:
        return self.url.removesuffix("/v1")


class PoolStats:
    """What the pool did since `reset()`; `metrics()` names it as the trainer logs it."""

    def __init__(self, servers: Sequence[Server]):
        self.servers = servers
        self.reset()

    def reset(self) -> None:
        self.requests = [0] * len(self.servers)
        self.in_flight_max = 0
        self.sticky_hits = 0
        self.new_trajectories = 0
        self.failovers = 0
        """First requests of trajectories sent on to another server after theirs failed."""
        self.failures = 0

    def metrics(self) -> dict[str, float]:
        out = {f"rollout/server_{i}_requests": float(n) for i, n in enumerate(self.requests)}
        down = sum(s.down_until is not None for s in self.servers)
        return out | {
            "rollout/server_in_flight_max": float(self.in_flight_max),
            "rollout/server_sticky_hits": float(self.sticky_hits),
            "rollout/server_new_trajectories": float(self.new_trajectories),
            "rollout/server_failovers": float(self.failovers),
            "rollout/server_failures": float(self.failures),
            "rollout/servers_down": float(down),
        }


class ServerPool:
    """Routes requests over `urls`: sticky per trajectory, least-loaded for new ones, around servers that fail."""

    def __init__(
        self,
        urls: Sequence[str],
        connect: Callable[[str], Any],
        *,
        name: str = "model",
        down_for_s: float = DOWN_FOR_S,
        probe_timeout_s: float = PROBE_TIMEOUT_S,
    ):
        if not urls:
            raise ConfigError("policy.base_url names no server")
        if len(set(urls)) != len(urls):
            raise ConfigError(f"policy.base_url names a server twice: {', '.join(urls)}")
        self.servers = [Server(url, connect(url)) for url in urls]
        self.name, self.down_for_s, self.probe_timeout_s = name, down_for_s, probe_timeout_s
        self.stats = PoolStats(self.servers)
        self._key = next(_pool_keys)
        self._turn = 0

    # --- routing ------------------------------------------------------------------------------------------

    async def call(self, prompt_ids: Sequence[int], send: Callable[[Server], Awaitable[Completion]]) -> Completion:
        """`send(server)` for the server this request belongs on; remembers the ids it ended with, so the
        trajectory's next request finds the same server."""
        bound = self._bound(prompt_ids)
        if bound is not None:
            return await self._continue(bound, prompt_ids, send)
        self.stats.new_trajectories += 1
        faults: list[str] = []
        tried: set[int] = set()
        while (index := await self._least_loaded(tried)) is not None:
            tried.add(index)
            try:
                completion = await self._send(self.servers[index], send)
            except ServerFault as e:
                faults.append(str(e))
                self.stats.failovers += 1
                continue
            return self._remember(index, prompt_ids, completion)
        down = [f"{s.url} ({s.down_reason})" for s in self.servers if s.down_until is not None]
        raise SamplerError(f"no server of policy.base_url can take a new trajectory: {'; '.join(faults or down)}")

    async def _continue(
        self, index: int, prompt_ids: Sequence[int], send: Callable[[Server], Awaitable[Completion]]
    ) -> Completion:
        """A later request of a trajectory, on its server and nowhere else (why: the module docstring)."""
        server = self.servers[index]
        if server.down_until is not None:
            raise SamplerError(
                f"{self.name} at {server.url}, which served this trajectory's earlier turns, is down "
                f"({server.down_reason}): the trajectory ends here"
            )
        self.stats.sticky_hits += 1
        try:
            completion = await self._send(server, send)
        except ServerFault as e:
            raise SamplerError(f"{e}; it served this trajectory's earlier turns: the trajectory ends here") from e
        return self._remember(index, prompt_ids, completion)

    def current_server(self) -> Server | None:
        """The server of the calling task's last request: its trajectory's server (None before its first request)."""
        entry = _last_request.get().get(self._key)
        return self.servers[entry[0]] if entry is not None else None

    def _bound(self, prompt_ids: Sequence[int]) -> int | None:
        """The server of this task's last request, when this prompt extends the ids that request ended with."""
        entry = _last_request.get().get(self._key)
        if entry is None:
            return None
        index, ids = entry
        if len(prompt_ids) < len(ids) or tuple(prompt_ids[: len(ids)]) != ids:
            return None
        return index

    def _remember(self, index: int, prompt_ids: Sequence[int], completion: Completion) -> Completion:
        ended_with = (*prompt_ids, *completion.token_ids)
        _last_request.set({**_last_request.get(), self._key: (index, ended_with)})
        return completion

    async def _least_loaded(self, tried: set[int]) -> int | None:
        """The index of the up server with the fewest requests in flight (ties in turn), after asking the servers
        whose time down has passed whether they are back; None when none is left to try."""
        now = time.monotonic()
        expired = [s for s in self.servers if s.down_until is not None and s.down_until <= now]
        for server in expired:
            await self._probe(server)
        count = len(self.servers)
        up = [i for i, s in enumerate(self.servers) if i not in tried and s.down_until is None]
        if not up:
            return None
        index = min(up, key=lambda i: (self.servers[i].in_flight, (i - self._turn) % count))
        self._turn = (index + 1) % count
        return index

    async def _send(self, server: Server, send: Callable[[Server], Awaitable[T]]) -> T:
        """`send(server)`, counted; a failure of the server marks it down and raises `ServerFault`, any other
        failure of the request raises `SamplerError`."""
        import openai

        self.stats.requests[self.servers.index(server)] += 1
        server.in_flight += 1
        self.stats.in_flight_max = max(self.stats.in_flight_max, server.in_flight)
        try:
            return await send(server)
        except ServerFault as e:
            self._mark_down(server, str(e))
            raise ServerFault(f"{self.name} at {server.url}: {e}") from e
        except openai.OpenAIError as e:  # the endpoint failed the request after the client's own retries
            message = f"{self.name} at {server.url}: {type(e).__name__}: {e}"
            if isinstance(e, openai.APIConnectionError) or (
                isinstance(e, openai.APIStatusError) and e.status_code >= 500
            ):
                self._mark_down(server, f"{type(e).__name__}")
                raise ServerFault(message) from e
            raise SamplerError(message) from e
        finally:
            server.in_flight -= 1

    # --- health and weight versions -----------------------------------------------------------------------

    def _mark_down(self, server: Server, reason: str) -> None:
        self.stats.failures += 1
        server.down_until = time.monotonic() + self.down_for_s
        server.down_reason = reason

    def expect_versions(self, versions: Sequence[int | None]) -> None:
        """After a weight update: the version each server (in `base_url` order) now holds, where it reports one."""
        now = time.monotonic()
        for server, version in zip(self.servers, versions, strict=True):
            server.expected_version = version
            if server.down_until is not None:  # a restarted server may hold the expected weights now: ask at once
                server.down_until = min(server.down_until, now)

    def check_version(self, server: Server, fingerprint: str | None) -> None:
        """Raise `ServerFault` when a response says its server samples from weights other than those the pool
        last pushed to it (`agentrl serve` names its version in `system_fingerprint`: `agentrl-vN`)."""
        found = _FINGERPRINT.fullmatch(fingerprint or "")
        if found and server.expected_version is not None and int(found[1]) != server.expected_version:
            raise ServerFault(
                f"it samples from weight version {found[1]}, the pool pushed version {server.expected_version} "
                "(it restarted, or another client updates it)"
            )

    async def _probe(self, server: Server) -> None:
        """Whether a server marked down is back: its `/health` answers, with the weight version the pool expects of
        it when it reports one. Until the probe ends the server stays down, so requests meanwhile pass it by."""
        import httpx

        server.down_until = time.monotonic() + self.down_for_s  # one probe at a time per server
        try:
            async with httpx.AsyncClient(timeout=self.probe_timeout_s) as client:
                response = await client.get(server.root + "/health")
        except httpx.HTTPError as e:
            server.down_reason = f"/health: {type(e).__name__}"
            return
        if response.status_code != 200:
            server.down_reason = f"/health: HTTP {response.status_code}"
            return
        try:
            version = response.json().get("weight_version")
        except (ValueError, AttributeError):  # a server whose /health has no JSON body (vLLM) reports no version
            version = None
        if version is not None and server.expected_version is not None and version != server.expected_version:
            server.down_reason = (
                f"it holds weight version {version}, the pool pushed version {server.expected_version}: it "
                "restarted, and takes trajectories again once the next weight update reaches it"
            )
            return
        server.down_until, server.down_reason = None, ""

    async def aclose(self) -> None:
        await asyncio.gather(*(s.client.close() for s in self.servers))
