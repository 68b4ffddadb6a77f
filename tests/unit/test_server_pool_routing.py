"""The routing rules of `ServerPool` (`agentrl/policy/server_pool.py`), against doubles of its servers: a sender that
answers, refuses the connection, answers an HTTP 400, or answers from weights other than the pool pushed. The same
rules against real `agentrl serve` processes: `tests/integration/test_server_pool.py`."""

from __future__ import annotations

import asyncio
import contextvars

import httpx
import openai
import pytest

from agentrl.errors import ConfigError, SamplerError
from agentrl.policy.server_pool import ServerPool, server_urls
from agentrl.types import Completion

pytestmark = pytest.mark.unit

URLS = ("http://a:8000/v1", "http://b:8000/v1")
A, B = URLS


class Servers:
    """What each server of the pool answers (`ok`, `dead`, `bad_request`, or `wrong_weights`) and what it received."""

    def __init__(self, pool: ServerPool):
        self.pool = pool
        self.mode = {s.url: "ok" for s in pool.servers}
        self.received: dict[str, list[tuple[int, ...]]] = {s.url: [] for s in pool.servers}
        pool.expect_versions([1] * len(pool.servers))

    def sender(self, prompt_ids: list[int]):
        prompt = tuple(prompt_ids)

        async def send(server) -> Completion:
            self.received[server.url].append(prompt)
            await asyncio.sleep(0)  # let the other trajectories interleave, as over a socket
            mode = self.mode[server.url]
            request = httpx.Request("POST", server.url + "/completions")
            if mode == "dead":
                raise openai.APIConnectionError(request=request)
            if mode == "bad_request":
                raise openai.BadRequestError("bad", response=httpx.Response(400, request=request), body=None)
            self.pool.check_version(server, "agentrl-v0" if mode == "wrong_weights" else "agentrl-v1")
            return Completion((len(prompt) % 97,), (0.0,), (0.0,), "x", "stop")

        return send


def pool_of(*urls: str) -> tuple[ServerPool, Servers]:
    pool = ServerPool(list(urls), lambda url: None)
    return pool, Servers(pool)


async def turn(pool: ServerPool, servers: Servers, ids: list[int]) -> list[int]:
    """One turn of the trajectory `ids`: the ids it ends with, an observation appended."""
    completion = await pool.call(ids, servers.sender(ids))
    return [*ids, *completion.token_ids, 7]


async def trajectory(pool: ServerPool, servers: Servers, turns: int, first: int) -> list[str]:
    """`turns` turns of one trajectory in the calling task; the server of each turn."""
    ids, on = [first, 1, 2], []
    for _ in range(turns):
        ids = await turn(pool, servers, ids)
        on.append(pool.current_server().url)
    return on


def test_base_url_names_one_url_per_server():
    assert server_urls(" http://a:8000/v1/ , http://b:8000/v1,") == URLS
    assert server_urls(list(URLS)) == URLS and server_urls(None) == ()
    with pytest.raises(ConfigError, match="twice"):
        pool_of(A, A)
    with pytest.raises(ConfigError, match="no server"):
        pool_of()


async def test_new_trajectories_spread_and_each_keeps_to_its_server():
    pool, servers = pool_of(*URLS)
    on = await asyncio.gather(*(trajectory(pool, servers, 3, first=i) for i in range(8)))
    assert all(len(set(turns)) == 1 for turns in on), on
    assert sorted(turns[0] for turns in on) == [A] * 4 + [B] * 4
    for turns, i in zip(on, range(8), strict=True):  # every prompt of a trajectory reached its own server only
        other = B if turns[0] == A else A
        assert not [p for p in servers.received[other] if p[0] == i]
    stats = pool.stats.metrics()
    assert stats["rollout/server_new_trajectories"] == 8 and stats["rollout/server_sticky_hits"] == 16
    assert stats["rollout/server_0_requests"] == stats["rollout/server_1_requests"] == 12
    assert stats["rollout/server_in_flight_max"] >= 2


async def test_a_new_trajectory_goes_to_the_least_loaded_server():
    pool, servers = pool_of(*URLS)
    held = asyncio.Event()

    async def slow(server):
        await held.wait()
        return Completion((1,), (0.0,), (0.0,), "x", "stop")

    context = contextvars.Context()
    ids = await asyncio.create_task(turn(pool, servers, [0, 1, 2]), context=context)
    assert await asyncio.create_task(trajectory(pool, servers, 1, first=1)) == [B]  # ties are taken in turn
    # two branches of a's trajectory busy on a: taking turns would send the next new trajectory to a
    busy = [asyncio.create_task(pool.call([*ids, k], slow), context=context.copy()) for k in range(2)]
    await asyncio.sleep(0)
    assert [s.in_flight for s in pool.servers] == [2, 0]
    assert await asyncio.create_task(trajectory(pool, servers, 1, first=2)) == [B]
    held.set()
    await asyncio.gather(*busy)


async def test_a_forked_branch_stays_on_its_parents_server():
    pool, servers = pool_of(*URLS)

    async def parent() -> tuple[str, list[str]]:
        ids = await turn(pool, servers, [1, 2, 3])
        mine = pool.current_server().url

        async def branch(k: int) -> str:
            await turn(pool, servers, [*ids, k])
            return pool.current_server().url

        return mine, await asyncio.gather(*(asyncio.create_task(branch(k)) for k in range(3)))

    for mine, branches in await asyncio.gather(*(asyncio.create_task(parent()) for _ in range(4))):
        assert branches == [mine] * 3


@pytest.mark.parametrize("failure", ["dead", "wrong_weights"])
async def test_a_later_request_whose_server_fails_ends_its_trajectory_and_is_never_moved(failure):
    pool, servers = pool_of(*URLS)
    on: dict[str, list[tuple[contextvars.Context, list[int]]]] = {A: [], B: []}
    for first in range(4):  # four trajectories, two on each server, each one turn in, each in a context of its own
        context = contextvars.Context()
        ids = await asyncio.create_task(turn(pool, servers, [first, 1, 2]), context=context)
        on[context.run(pool.current_server).url].append((context, ids))
    assert [len(on[A]), len(on[B])] == [2, 2]

    async def next_turn(context: contextvars.Context, ids: list[int]) -> list[int]:
        return await asyncio.create_task(turn(pool, servers, ids), context=context)

    servers.mode[B] = failure
    sent_to_a = len(servers.received[A])
    with pytest.raises(SamplerError, match=f"{B}.*the trajectory ends here") as first_error:
        await next_turn(*on[B][0])
    assert A not in str(first_error.value)
    assert pool.servers[1].down_until is not None and len(servers.received[A]) == sent_to_a  # not moved to a
    with pytest.raises(SamplerError, match=f"{B}, which served this trajectory's earlier turns, is down"):
        await next_turn(*on[B][1])  # b is down now: not even sent
    assert len(servers.received[B]) == 3
    for context, ids in on[A]:  # a's trajectories go on, and new trajectories start on a
        await next_turn(context, ids)
    assert await asyncio.create_task(trajectory(pool, servers, 2, first=9)) == [A, A]
    stats = pool.stats.metrics()
    assert stats["rollout/servers_down"] == 1 and stats["rollout/server_failures"] == 1
    assert stats["rollout/server_failovers"] == 0 and stats["rollout/server_sticky_hits"] == 4


@pytest.mark.parametrize("failure", ["dead", "wrong_weights"])
async def test_the_first_request_of_a_trajectory_moves_to_the_next_server_when_its_own_fails(failure):
    pool, servers = pool_of(*URLS)
    servers.mode[A] = failure  # the first new trajectory tries a first (ties are taken in turn, from the first)
    assert await asyncio.create_task(trajectory(pool, servers, 2, first=0)) == [B, B]
    assert len(servers.received[A]) == 1 and pool.stats.failovers == 1 and pool.servers[0].down_until is not None
    servers.mode[B] = failure
    with pytest.raises(SamplerError, match="no server of policy.base_url can take a new trajectory"):
        await asyncio.create_task(trajectory(pool, servers, 1, first=1))


async def test_a_request_the_server_refuses_fails_it_without_marking_the_server_down():
    pool, servers = pool_of(*URLS)
    servers.mode[A] = servers.mode[B] = "bad_request"
    with pytest.raises(SamplerError, match="BadRequestError"):
        await asyncio.create_task(trajectory(pool, servers, 1, first=0))
    assert all(s.down_until is None for s in pool.servers) and pool.stats.failures == 0


async def test_a_server_on_other_weights_than_the_pool_pushed_takes_no_new_trajectories():
    pool, servers = pool_of(*URLS)
    servers.mode[B] = "wrong_weights"  # b restarted: it answers from its initial weights
    assert [await asyncio.create_task(trajectory(pool, servers, 2, first=i)) for i in range(3)] == [[A, A]] * 3
    assert "weight version 0, the pool pushed version 1" in pool.servers[1].down_reason
    assert len(servers.received[B]) == 1 and pool.stats.failovers == 1


def test_each_trl_server_of_a_pool_joins_the_trainer_at_a_port_of_its_own():
    from agentrl.policy.trl_weight_client import TrlWeightClient
    from agentrl.policy.weight_sync import _client

    class Joined:  # stands in for TRL's VLLMClient: what it was built with
        def __init__(self, **kwargs):
            self.kwargs = kwargs

        def init_communicator(self, device):
            pass

    clients = [_client("trl", f"http://h{i}:8000", None, "cuda:0", i) for i in range(3)]
    assert [c.group_port for c in clients] == [51216, 51217, 51218]
    client = TrlWeightClient("http://h1:8000", "cuda:0", group_port=51217, client_class=Joined)
    client.connect()
    assert client.client.kwargs["group_port"] == 51217 and client.client.kwargs["base_url"] == "http://h1:8000"
