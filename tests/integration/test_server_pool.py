"""Several inference servers behind `policy.base_url` (`agentrl/policy/server_pool.py`), against real `agentrl serve`
gateways of the tiny policy on 127.0.0.1: new trajectories spread over the servers, each trajectory keeps to its own,
every server gets each weight update before the next collect, and a server that dies takes only its own
trajectories with it (as infrastructure errors), the rest going on on the others.

Most servers run in threads of the test process (`serve_in_thread`), wrapped so the test can see which prompts each
one received; the server that dies is a process of its own, killed with SIGKILL.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
import torch

from agentrl.config import PolicyConfig, RolloutConfig, load_config
from agentrl.config_io import load_dataclass
from agentrl.errors import ConfigError, InfraError, SamplerError
from agentrl.policy import load_model_and_tokenizer
from agentrl.policy.backends import chat_settings
from agentrl.policy.openai_policy import OpenAICompletionsPolicy
from agentrl.policy.transformers_policy import continuation_logprobs
from agentrl.protocols import SamplingParams
from agentrl.registry import load_scaffold
from agentrl.rollout.collect import collect_groups
from agentrl.serve.app import build_service, create_app
from agentrl.testing import serve_in_thread
from agentrl.toolserver.app import create_app as create_tool_app
from agentrl.toolserver.client import ToolClient
from agentrl.types import StopReason

pytestmark = pytest.mark.integration

TOKEN = "pool-weights-token"
ROLLOUT = RolloutConfig(max_turns=3, max_new_tokens_per_turn=48)


def recorded(app, service, seen: list[tuple[tuple[int, ...], int]]):
    """`app`, noting the token-id prompt of every `/v1/completions` request it receives, with the weight version
    `service` held when it arrived."""

    async def asgi(scope, receive, send):
        if scope["type"] != "http" or scope["path"] != "/v1/completions":
            return await app(scope, receive, send)
        messages = []
        while not messages or messages[-1].get("more_body"):
            messages.append(await receive())
        prompt = tuple(json.loads(b"".join(m.get("body", b"") for m in messages))["prompt"])
        seen.append((prompt, service.weights.version if service.weights is not None else 0))
        pending = iter(messages)

        async def replay():
            return next(pending, None) or await receive()

        return await app(scope, replay, send)

    return asgi


@contextmanager
def two_servers(**service) -> Iterator[tuple[list[str], list[list[tuple[tuple[int, ...], int]]]]]:
    """Two `agentrl serve` apps of the tiny policy in threads: their URLs, and (prompt, weight version) of every
    request each received."""
    services = [build_service("tiny", device="cpu", **service) for _ in range(2)]
    seen: list[list[tuple[tuple[int, ...], int]]] = [[], []]
    with serve_in_thread(recorded(create_app(services[0]), services[0], seen[0])) as a:
        with serve_in_thread(recorded(create_app(services[1]), services[1], seen[1])) as b:
            yield [a, b], seen


def pooled(tokenizer, urls: list[str], **kwargs) -> OpenAICompletionsPolicy:
    policy = OpenAICompletionsPolicy(tokenizer, base_url=[u + "/v1" for u in urls], model="tiny", **kwargs)
    policy.chat_settings = chat_settings(PolicyConfig(model="tiny"), tokenizer)
    return policy


def turn_prompts(trajectory) -> list[tuple[int, ...]]:
    """The prompt of each of the trajectory's policy calls: everything before the turn's sampled ids."""
    ids, prompts, at = trajectory.token_ids, [], len(trajectory.prompt_ids)
    for turn in trajectory.turns:
        prompts.append(tuple(ids[:at]))
        at += len(turn.completion_ids) + len(turn.observation_ids)
    return prompts


async def episodes(policy, tasks: int, samples: int, **collect):
    scaffold = load_scaffold("code", ROLLOUT)
    async with ToolClient(app=create_tool_app(list(scaffold.toolsets()))) as tools:
        groups = await collect_groups(
            scaffold,
            scaffold.tasks("train")[:tasks],
            policy,
            tools,
            samples_per_prompt=samples,
            step=1,
            seed=0,
            **collect,
        )
    return [t for g in groups for t in g.trajectories]


# --- routing ----------------------------------------------------------------------------------------------


async def test_new_trajectories_spread_over_the_servers_and_each_keeps_to_its_own(tiny_tokenizer):
    with two_servers() as (urls, seen):
        policy = pooled(tiny_tokenizer, urls)
        trajectories = await episodes(policy, tasks=4, samples=4)
        await policy.aclose()
    assert all(t.stop_reason is not StopReason.INFRA_ERROR for t in trajectories), [t.error for t in trajectories]
    prompts = [[p for p, _ in s] for s in seen]
    calls = sum(len(t.turns) for t in trajectories)
    assert calls > len(trajectories)  # the tiny policy calls its tools: trajectories of several turns
    assert len(prompts[0]) + len(prompts[1]) == calls
    assert min(len(prompts[0]), len(prompts[1])) >= calls / 4, (len(prompts[0]), len(prompts[1]))
    for t in trajectories:  # some server received every prompt of the trajectory
        assert any(all(p in prompts[s] for p in turn_prompts(t)) for s in (0, 1)), t.trajectory_id
    stats = policy.server_stats.metrics()
    assert stats["rollout/server_0_requests"] == len(prompts[0])
    assert stats["rollout/server_1_requests"] == len(prompts[1])
    assert stats["rollout/server_new_trajectories"] == len(trajectories)
    assert stats["rollout/server_sticky_hits"] == calls - len(trajectories)
    assert stats["rollout/servers_down"] == 0 and stats["rollout/server_in_flight_max"] >= 2


def test_base_url_takes_several_servers_on_the_command_line_and_in_toml(tmp_path):
    assert PolicyConfig().base_urls == ()
    one = load_dataclass(PolicyConfig, None, ["base_url=http://a:8000/v1"])
    assert one.base_url == "http://a:8000/v1" and one.base_urls == ("http://a:8000/v1",)
    two = load_dataclass(PolicyConfig, None, ["base_url=http://a:8000/v1,http://b:8000/v1/"])
    assert two.base_urls == ("http://a:8000/v1", "http://b:8000/v1")
    (tmp_path / "run.toml").write_text('[policy]\nbase_url = ["http://a:8000/v1", "http://b:8000/v1"]\n')
    assert load_config(tmp_path / "run.toml").policy.base_urls == ("http://a:8000/v1", "http://b:8000/v1")
    with pytest.raises(ConfigError, match="twice"):
        OpenAICompletionsPolicy(None, base_url="http://a:8000/v1,http://a:8000/v1", model="m")


# --- weight updates ---------------------------------------------------------------------------------------


def gap(url: str, model, prompt: list[int]) -> float:
    """Largest |served − learner| logprob over 24 tokens the server at `url` samples."""
    body = {"model": "tiny", "prompt": prompt, "max_tokens": 24, "seed": 3, "logprobs": 1}
    body |= {"return_tokens_as_token_ids": True, "skip_special_tokens": False}
    lp = httpx.post(url + "/v1/completions", json=body, timeout=60).raise_for_status().json()["choices"][0]["logprobs"]
    ids = [int(t.removeprefix("token_id:")) for t in lp["tokens"]]
    mine = continuation_logprobs(model, [(prompt, ids)], pad_token_id=0)[0]
    return max(abs(a - b) for a, b in zip(lp["token_logprobs"], mine, strict=True))


def test_every_server_is_updated_before_each_collect_of_a_two_step_run(tmp_path, tiny_tokenizer):
    from agentrl.trainer import Trainer

    with two_servers(weights_token=TOKEN) as (urls, seen):
        overrides = [
            "policy.backend=openai",
            f"policy.base_url={urls[0]}/v1,{urls[1]}/v1",  # as on the command line
            f"policy.weight_sync_token={TOKEN}",
            "rollout.prompts_per_step=2",
            "rollout.samples_per_prompt=4",
            "trainer.steps=2",
            "eval.every_steps=0",
            "progress=false",
            "tensorboard=false",
        ]
        trainer = Trainer(overrides, tmp_path)
        assert trainer.policy.weight_sync.name == "agentrl" and len(trainer.policy.weight_sync.clients) == 2
        metrics = trainer.run()
        requests = [list(server) for server in seen]  # before `gap` asks the servers anything
        versions = [httpx.get(u + "/admin/weights").json()["version"] for u in urls]
        prompt = tiny_tokenizer("Use the tools. What is 6 * 7?", add_special_tokens=False)["input_ids"]
        gaps = [gap(u, trainer.model, prompt) for u in urls]
    # one update when the policy was built, one after each step; both servers hold the learner's weights again
    assert versions == [3, 3] and trainer.policy.weight_sync.version == 3 and trainer.policy.version == 2
    assert max(gaps) < 1e-5, gaps
    assert metrics["train/sampler_logprob_abs_diff"] < 1e-4  # step 2 sampled from the learner's weights
    calls = {}
    for step in (1, 2):
        lines = (tmp_path / "trajectories" / f"step_{step:06d}.jsonl").read_text().splitlines()
        episodes = [json.loads(line) for line in lines]
        assert {e["policy_version"] for e in episodes} == {step - 1}
        calls[step] = sum(len(e["turns"]) for e in episodes)
    # every request of step s reached a server holding weight version s, and both servers served both steps
    for server in requests:
        assert [v for _, v in server] == sorted(v for _, v in server)
        assert {v for _, v in server} == {1, 2}, [v for _, v in server]
    assert [sum(v == step for s in requests for _, v in s) for step in (1, 2)] == [calls[1], calls[2]]
    # the step's metrics count the requests of its own collect only
    served = [metrics[f"rollout/server_{i}_requests"] for i in (0, 1)]
    assert sum(served) == calls[2] and min(served) > 0 and metrics["rollout/servers_down"] == 0


def learner(seed: int):
    model, _ = load_model_and_tokenizer(PolicyConfig(model="tiny", device="cpu"))
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=generator) * 0.01)
    return model


def pool_config(urls: list[str], **fields) -> PolicyConfig:
    return PolicyConfig(model="tiny", backend="openai", base_url=tuple(u + "/v1" for u in urls), **fields)


def test_a_server_that_misses_an_update_stops_the_step_naming_it(tiny_tokenizer):
    with serve_in_thread(create_app(build_service("tiny", device="cpu", weights_token=TOKEN))) as a:
        with serve_in_thread(create_app(build_service("tiny", device="cpu", weights_token=TOKEN))) as b:
            cfg = pool_config([a, b], weight_sync_token=TOKEN)
            policy = OpenAICompletionsPolicy.from_config(cfg, tiny_tokenizer, source_model=learner(seed=1))
            assert policy.weight_sync.server_versions == [1, 1]
        with pytest.raises(InfraError, match=re.escape(f"failed on 1 of 2 servers ({b})")) as raised:
            policy.sync_weights()
        assert "\n" not in str(raised.value)
        assert httpx.get(a + "/admin/weights").json()["version"] == 2  # the other server took it


def test_every_server_must_take_weights_before_training(tiny_tokenizer):
    with serve_in_thread(create_app(build_service("tiny", device="cpu", weights_token=TOKEN))) as a:
        with serve_in_thread(create_app(build_service("tiny", device="cpu"))) as b:
            with pytest.raises(
                ConfigError, match=re.escape(f"the server at {b}") + ".*--weights-token.*off_policy=true"
            ):
                OpenAICompletionsPolicy.from_config(
                    pool_config([a, b], weight_sync_token=TOKEN), tiny_tokenizer, source_model=learner(seed=2)
                )


async def test_a_server_back_from_a_crash_takes_no_trajectory_before_the_next_update(tiny_tokenizer):
    with serve_in_thread(create_app(build_service("tiny", device="cpu", weights_token=TOKEN))) as a:
        with serve_in_thread(create_app(build_service("tiny", device="cpu", weights_token=TOKEN))) as b:
            cfg = pool_config([a, b], weight_sync_token=TOKEN)
            policy = OpenAICompletionsPolicy.from_config(cfg, tiny_tokenizer, source_model=learner(seed=3))
            policy.pool.down_for_s = 0.0  # ask a server marked down whether it is back at every new trajectory
        port = int(b.rsplit(":", 1)[1])
        prompt = tiny_tokenizer("What is 2 + 2?", add_special_tokens=False)["input_ids"]
        params = SamplingParams(max_new_tokens=4)
        # b is gone: the trajectory that tried it first starts on a instead
        await asyncio.gather(*(asyncio.create_task(policy.generate(prompt, params)) for _ in range(2)))
        assert policy.server_stats.failovers == 1 and policy.pool.servers[1].down_until is not None
        with serve_in_thread(create_app(build_service("tiny", device="cpu", weights_token=TOKEN)), port=port):
            # back, but on its initial weights (version 0, not 1): its /health says so, and it stays out
            before = list(policy.server_stats.requests)
            await asyncio.gather(*(asyncio.create_task(policy.generate(prompt, params)) for _ in range(2)))
            assert policy.server_stats.requests == [before[0] + 2, before[1]]
            assert "restarted" in policy.pool.servers[1].down_reason
            policy.sync_weights()  # the update puts it back on the learner's weights
            assert policy.weight_sync.clients[1].restarts == 1
            before = list(policy.server_stats.requests)
            await asyncio.gather(*(asyncio.create_task(policy.generate(prompt, params)) for _ in range(2)))
            assert policy.pool.servers[1].down_until is None and policy.server_stats.requests[1] == before[1] + 1
        await policy.aclose()


async def test_a_server_that_restarts_between_two_turns_ends_that_trajectory_and_waits_for_the_update(tiny_tokenizer):
    prompt = tiny_tokenizer("What is 2 + 2?", add_special_tokens=False)["input_ids"]
    params = SamplingParams(max_new_tokens=4)
    with serve_in_thread(create_app(build_service("tiny", device="cpu", weights_token=TOKEN))) as a:
        with serve_in_thread(create_app(build_service("tiny", device="cpu", weights_token=TOKEN))) as b:
            cfg = pool_config([a, b], weight_sync_token=TOKEN)
            policy = OpenAICompletionsPolicy.from_config(cfg, tiny_tokenizer, source_model=learner(seed=3))
            policy.pool.down_for_s = 0.0  # ask a server marked down whether it is back at every new trajectory
            # two trajectories, one on each server, each in a context of its own (as each runs in a task of its own)
            contexts = [contextvars.Context() for _ in range(2)]
            firsts = await asyncio.gather(
                *(asyncio.create_task(policy.generate(prompt, params), context=c) for c in contexts)
            )
            on = [c.run(policy.pool.current_server).url for c in contexts]
            assert sorted(on) == sorted([a + "/v1", b + "/v1"])
        port = int(b.rsplit(":", 1)[1])
        with serve_in_thread(create_app(build_service("tiny", device="cpu", weights_token=TOKEN)), port=port):
            # b is back before the pool saw it go, on its initial weights (version 0, not 1): the trajectory it
            # served ends; the one on a goes on
            seconds = [
                asyncio.create_task(policy.generate([*prompt, *f.token_ids], params), context=c)
                for c, f in zip(contexts, firsts, strict=True)
            ]
            results = dict(zip(on, await asyncio.gather(*seconds, return_exceptions=True), strict=True))
            assert isinstance(results[b + "/v1"], SamplerError), results
            assert re.search(f"{b}/v1.*weight version 0.*the trajectory ends here", str(results[b + "/v1"]))
            assert not isinstance(results[a + "/v1"], BaseException), results
            # new trajectories keep off b: its /health says it holds version 0
            before = list(policy.server_stats.requests)
            await asyncio.gather(*(asyncio.create_task(policy.generate(prompt, params)) for _ in range(2)))
            assert policy.server_stats.requests == [before[0] + 2, before[1]]
            assert "restarted" in policy.pool.servers[1].down_reason
            policy.sync_weights()  # the update puts it back on the learner's weights
            assert policy.weight_sync.clients[1].restarts == 1
            before = list(policy.server_stats.requests)
            await asyncio.gather(*(asyncio.create_task(policy.generate(prompt, params)) for _ in range(2)))
            assert policy.pool.servers[1].down_until is None and policy.server_stats.requests[1] == before[1] + 1
        await policy.aclose()


# --- a server that dies -----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve_processes(count: int) -> Iterator[list[tuple[str, subprocess.Popen]]]:
    """`agentrl serve --model tiny` in `count` processes of their own; yields (URL, process) once all answer."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    started = []
    for _ in range(count):
        port = free_port()
        command = [sys.executable, "-m", "agentrl.cli.app", "serve", "--model", "tiny", "--device", "cpu"]
        process = subprocess.Popen(
            [*command, "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        started.append((f"http://127.0.0.1:{port}", process))
    try:
        deadline = time.monotonic() + 120
        for url, process in started:
            while True:
                assert process.poll() is None, process.stderr.read().decode()[-2000:]
                assert time.monotonic() < deadline, "agentrl serve did not answer within 120 s"
                try:
                    if httpx.get(url + "/health", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.2)
        yield started
    finally:
        for _, process in started:
            if process.poll() is None:
                process.terminate()
                process.wait(timeout=30)


class AfterFirstTurns:
    """The policy under test, holding every trajectory's second call until `release` is set: by then each has its
    server, and the test can kill one. Notes each trajectory's server, and whether it started after the kill."""

    def __init__(self, policy, first_turns: int):
        self.policy, self.tokenizer, self.version = policy, policy.tokenizer, policy.version
        self.chat_settings = policy.chat_settings
        self.calls: dict[asyncio.Task, int] = {}
        self.server: dict[asyncio.Task, str] = {}
        self.started_after_kill: set[asyncio.Task] = set()
        self.first_turns, self.expected, self.killed = 0, first_turns, False
        self.first_turns_done, self.release = asyncio.Event(), asyncio.Event()

    async def generate(self, prompt_ids, params):
        task = asyncio.current_task()
        self.calls[task] = self.calls.get(task, 0) + 1
        if self.calls[task] > 1:
            await self.release.wait()
            return await self.policy.generate(prompt_ids, params)
        if self.killed:
            self.started_after_kill.add(task)
        out = await self.policy.generate(prompt_ids, params)
        self.server[task] = self.policy.pool.current_server().url
        self.first_turns += 1
        if self.first_turns >= self.expected:
            self.first_turns_done.set()
        return out


async def test_a_killed_server_fails_its_own_trajectories_and_the_rest_go_on_on_the_other(tiny_tokenizer):
    with serve_processes(2) as [(a, _), (b, doomed)]:
        policy = pooled(tiny_tokenizer, [a, b], max_retries=0)
        held = AfterFirstTurns(policy, first_turns=8)
        collect = asyncio.create_task(episodes(held, tasks=4, samples=4, max_concurrent=8))
        await asyncio.wait_for(held.first_turns_done.wait(), 60)
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(timeout=30)
        held.killed = True
        held.release.set()
        trajectories = await collect
        await policy.aclose()
    assert len(trajectories) == 16
    # exactly the trajectories that had started on b and had more to sample fail, as infrastructure errors
    on_b = [task for task, url in held.server.items() if url == f"{b}/v1" and held.calls[task] > 1]
    failed = [t for t in trajectories if t.stop_reason is StopReason.INFRA_ERROR]
    assert on_b and len(failed) == len(on_b), ([t.error for t in failed], len(on_b))
    assert all(f"{b}/v1" in t.error and f"{a}/v1" not in t.error for t in failed), [t.error for t in failed]
    assert all(t.reward is None for t in failed)
    # the trajectories started after the kill all run on a
    assert held.started_after_kill and {held.server[task] for task in held.started_after_kill} == {f"{a}/v1"}
    stats = policy.server_stats.metrics()
    assert stats["rollout/servers_down"] == 1 and stats["rollout/server_failures"] >= 1
