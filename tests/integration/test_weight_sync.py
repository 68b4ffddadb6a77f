"""Weight updates of `agentrl serve` (`/admin/weights`) and the trainer's side of them, on 127.0.0.1.

The served model is the shipped tiny policy; the learner is another copy whose weights the tests move, so the served
`/v1/completions` logprobs must follow the learner's exactly once an update lands. Test doubles stand in for the model
only where timing must be controlled (a request still sampling when an update arrives); TRL's `VLLMClient` is
replaced by a recorder where it would need vLLM and a GPU.
"""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import httpx
import pytest
import torch

from agentrl.config import PolicyConfig
from agentrl.policy import load_model_and_tokenizer
from agentrl.policy.learner_weights import learner_weights
from agentrl.policy.openai_policy import OpenAICompletionsPolicy
from agentrl.policy.transformers_policy import continuation_logprobs
from agentrl.protocols import SamplingParams
from agentrl.serve.app import build_service, create_app
from agentrl.serve.chat_completions import ChatService
from agentrl.serve.sampling_gate import SamplingGate
from agentrl.serve.weights import WeightUpdater
from agentrl.testing import serve_in_thread
from agentrl.types import Completion

pytestmark = pytest.mark.integration

TOKEN = "weights-s3cret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def learner(seed: int | None = None, scale: float = 0.01):
    """A trainable copy of the tiny policy, its weights moved by noise of `scale` when `seed` is given."""
    model, _ = load_model_and_tokenizer(PolicyConfig(model="tiny", device="cpu"))
    if seed is not None:
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn(p.shape, generator=generator) * scale)
    return model


def prompt_ids(tokenizer) -> list[int]:
    return tokenizer("Use the tools. What is 6 * 7?", add_special_tokens=False)["input_ids"]


def sampled(url: str, prompt: list[int], seed: int = 0) -> tuple[list[int], list[float]]:
    """Tokens and logprobs the server samples at temperature 1 (token ids, as the training backend asks)."""
    body = {
        "model": "tiny",
        "prompt": prompt,
        "max_tokens": 24,
        "temperature": 1.0,
        "seed": seed,
        "logprobs": 1,
        "return_tokens_as_token_ids": True,
        "skip_special_tokens": False,
    }
    lp = httpx.post(url + "/v1/completions", json=body, timeout=60).raise_for_status().json()["choices"][0]["logprobs"]
    return [int(t.removeprefix("token_id:")) for t in lp["tokens"]], lp["token_logprobs"]


def gap(url: str, model, prompt: list[int], seed: int = 0) -> float:
    """Largest |served logprob − learner logprob| over the tokens the server sampled."""
    ids, served = sampled(url, prompt, seed)
    mine = continuation_logprobs(model, [(prompt, ids)], pad_token_id=0)[0]
    return max(abs(a - b) for a, b in zip(served, mine, strict=True))


@pytest.fixture
def served():
    service = build_service("tiny", device="cpu", weights_token=TOKEN)
    with serve_in_thread(create_app(service)) as url:
        yield url, service


# --- the endpoint --------------------------------------------------------------------------------------


def test_an_update_from_a_checkpoint_path_moves_the_served_logprobs_to_the_learners(served, tmp_path, tiny_tokenizer):
    from agentrl.config import TrainerConfig
    from agentrl.train.checkpoint import TrainerState, save_checkpoint
    from agentrl.train.learner import Learner

    url, _ = served
    prompt = prompt_ids(tiny_tokenizer)
    model = learner(seed=1)
    assert gap(url, model, prompt) > 1e-2  # the learner has moved away from the served weights
    ckpt = save_checkpoint(
        tmp_path, TrainerState(1, 0.0, 1), model, tiny_tokenizer, Learner(model, TrainerConfig(), pad_token_id=0)
    )
    response = httpx.post(url + "/admin/weights", json={"path": str(ckpt)}, headers=AUTH, timeout=60)
    assert response.status_code == 200, response.text
    assert response.json()["version"] == 1 and response.json()["tensors"] == len(list(model.parameters()))
    assert gap(url, model, prompt) < 1e-5

    moved = learner(seed=2)  # a `save_pretrained` export (the checkpoint's policy/ directory) works too
    moved.save_pretrained(tmp_path / "export")
    assert (
        httpx.post(url + "/admin/weights", json={"path": str(tmp_path / "export")}, headers=AUTH).json()["version"] == 2
    )
    assert gap(url, moved, prompt) < 1e-5
    assert httpx.get(url + "/admin/weights").json()["version"] == 2
    assert httpx.get(url + "/health").json()["weight_version"] == 2


def test_an_update_streamed_as_safetensors_bytes(served, tiny_tokenizer):
    from safetensors.torch import save

    url, _ = served
    prompt = prompt_ids(tiny_tokenizer)
    model = learner(seed=3)
    before = sampled(url, prompt)
    data = save({n: p.detach().contiguous() for n, p in model.named_parameters()})
    headers = {**AUTH, "Content-Type": "application/octet-stream"}
    response = httpx.post(url + "/admin/weights", content=data, headers=headers, timeout=60)
    assert response.status_code == 200, response.text
    assert response.json()["version"] == 1
    assert sampled(url, prompt) != before and gap(url, model, prompt) < 1e-5

    # a partial update (only what changed) is an update too
    with torch.no_grad():
        model.model.layers[0].mlp.down_proj.weight.mul_(1.5)
    part = save({"model.layers.0.mlp.down_proj.weight": model.model.layers[0].mlp.down_proj.weight.detach()})
    assert httpx.post(url + "/admin/weights", content=part, headers=headers).json()["version"] == 2
    assert gap(url, model, prompt) < 1e-5


def test_wrong_or_missing_tokens_are_refused_and_change_nothing(served, tiny_tokenizer):
    from safetensors.torch import save

    url, _ = served
    data = save({n: p.detach().contiguous() for n, p in learner(seed=4).named_parameters()})
    kind = {"Content-Type": "application/octet-stream"}
    missing = httpx.post(url + "/admin/weights", content=data, headers=kind)
    assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
    wrong = httpx.post(url + "/admin/weights", content=data, headers={**kind, "Authorization": "Bearer nope"})
    assert wrong.status_code == 403 and wrong.json()["error"]["code"] == "forbidden"
    assert (
        httpx.post(url + "/admin/weights", json={"path": "/etc"}, headers={"Authorization": "Bearer nope"}).status_code
        == 403
    )

    capability = httpx.get(url + "/admin/weights").json()
    assert capability["weight_updates"] is True and capability["version"] == 0 and capability["authorized"] is None
    assert httpx.get(url + "/admin/weights", headers={"Authorization": "Bearer nope"}).json()["authorized"] is False
    assert httpx.get(url + "/admin/weights", headers=AUTH).json()["authorized"] is True
    assert gap(url, learner(), prompt_ids(tiny_tokenizer)) < 1e-5  # still the weights it started with


def test_malformed_updates_are_refused_whole(served, tiny_tokenizer):
    from safetensors.torch import save

    url, _ = served
    headers = {**AUTH, "Content-Type": "application/octet-stream"}
    good = learner(seed=5).model.embed_tokens.weight.detach()
    cases = {
        "name no parameter": {"model.embed_tokens.weight": good, "model.nope.weight": torch.zeros(2)},
        "has shape": {"model.embed_tokens.weight": good[:, :8].contiguous()},
        "LoRA adapter": {"base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight": torch.zeros(4, 128)},
    }
    for expected, tensors in cases.items():
        response = httpx.post(url + "/admin/weights", content=save(tensors), headers=headers)
        assert response.status_code == 400 and expected in response.json()["error"]["message"], response.text
    assert httpx.post(url + "/admin/weights", content=b"not safetensors", headers=headers).status_code == 400
    assert httpx.post(url + "/admin/weights", json={"path": "/no/such/dir"}, headers=AUTH).status_code == 400
    assert (
        httpx.post(url + "/admin/weights", content=b"x", headers={**AUTH, "Content-Type": "text/plain"}).status_code
        == 415
    )
    assert httpx.get(url + "/admin/weights").json()["version"] == 0
    assert gap(url, learner(), prompt_ids(tiny_tokenizer)) < 1e-5


@pytest.mark.parametrize("flags", [{}, {"weights_token": TOKEN, "weight_updates": False}])
def test_updates_are_off_without_a_token_or_with_no_weight_updates(flags):
    from safetensors.torch import save

    service = build_service("tiny", device="cpu", **flags)
    with serve_in_thread(create_app(service)) as url:
        capability = httpx.get(url + "/admin/weights").json()
        data = save({"model.norm.weight": torch.ones(128)})
        response = httpx.post(
            url + "/admin/weights", content=data, headers={**AUTH, "Content-Type": "application/octet-stream"}
        )
    assert capability["weight_updates"] is False and capability["sources"] == []
    assert ("--weights-token" if not flags else "--no-weight-updates") in capability["reason"]
    assert response.status_code == 403 and response.json()["error"]["code"] == "weight_updates_disabled"


class SlowPolicy:
    """A double for the model: one weight, which each request reads when it starts and when it ends."""

    def __init__(self, tokenizer, seconds: float = 0.5):
        self.tokenizer, self.seconds, self.version = tokenizer, seconds, 0
        self.model = torch.nn.Linear(1, 1, bias=False)
        with torch.no_grad():
            self.model.weight.fill_(1.0)

    async def generate(self, prompt_ids, params) -> Completion:
        first = float(self.model.weight.detach())
        await asyncio.sleep(self.seconds)
        return Completion((5, 6), (first, float(self.model.weight.detach())), (0.0, 0.0), "ab", "length")


async def until(condition, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.005)


async def test_an_update_waits_for_requests_in_flight_and_holds_new_ones(tiny_tokenizer):
    """No request is sampled partly by the old weights and partly by the new."""
    from safetensors.torch import save

    policy = SlowPolicy(tiny_tokenizer)
    service = ChatService(policy, ("slow",))
    service.weights = WeightUpdater(policy, service.gate, token=TOKEN)
    body = {"model": "slow", "prompt": [1, 2], "max_tokens": 2, "logprobs": 1}
    headers = {**AUTH, "Content-Type": "application/octet-stream"}
    with serve_in_thread(create_app(service)) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            first = asyncio.create_task(client.post("/v1/completions", json=body))
            await until(lambda: service.gate.in_flight == 1)
            update = asyncio.create_task(
                client.post("/admin/weights", content=save({"weight": torch.full((1, 1), 2.0)}), headers=headers)
            )
            await until(lambda: service.gate.updating)
            later = asyncio.create_task(client.post("/v1/completions", json=body))
            first, update, later = await asyncio.gather(first, update, later)
    assert first.json()["choices"][0]["logprobs"]["token_logprobs"] == [1.0, 1.0]  # old weights throughout
    assert update.json()["version"] == 1 and update.json()["waited_s"] > 0.2
    assert later.json()["choices"][0]["logprobs"]["token_logprobs"] == [2.0, 2.0]  # new weights throughout


class SlowForward(torch.nn.Module):
    """A double for the model whose forward pass reads its weight at its start and its end."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(1))
        self.started = asyncio.Event()
        self.loop = asyncio.get_running_loop()

    def forward(self, seconds: float) -> tuple[float, float]:
        first = float(self.weight)
        self.loop.call_soon_threadsafe(self.started.set)
        time.sleep(seconds)
        return first, float(self.weight)


async def test_an_update_waits_for_the_decoding_step_in_flight():
    """Even a step no request waits for any more (its caller went away) never sees weights change under it."""
    model = SlowForward()
    policy = SimpleNamespace(model=model, version=0)
    updater = WeightUpdater(policy, SamplingGate(), token=TOKEN)
    step = asyncio.create_task(asyncio.to_thread(model, 0.4))
    await model.started.wait()
    result = await updater.apply({"weight": torch.full((1,), 3.0)})
    assert await step == (1.0, 1.0) and float(model.weight) == 3.0 and result["version"] == policy.version == 1
    assert model(0.0) == (3.0, 3.0)


# --- the trainer's side --------------------------------------------------------------------------------


def config(url: str, **fields) -> PolicyConfig:
    return PolicyConfig(model="tiny", backend="openai", base_url=url + "/v1", **fields)


async def test_sync_weights_pushes_every_step_and_refresh_does_not_count_one(served, tiny_tokenizer):
    url, _ = served
    prompt = prompt_ids(tiny_tokenizer)
    model = learner(seed=6)
    policy = OpenAICompletionsPolicy.from_config(
        config(url, weight_sync_token=TOKEN), tiny_tokenizer, source_model=model
    )
    assert policy.weight_sync.name == "agentrl"
    assert (policy.version, policy.weight_sync.version) == (0, 1)  # built: the server starts from the learner's weights
    assert gap(url, model, prompt) < 1e-5
    for step in (1, 2):
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(1.02)
        assert gap(url, model, prompt) > 1e-4
        policy.sync_weights()
        assert policy.version == step and httpx.get(url + "/admin/weights").json()["version"] == step + 1
        assert gap(url, model, prompt) < 1e-5
    policy.refresh_weights()
    assert policy.version == 2 and httpx.get(url + "/admin/weights").json()["version"] == 4
    out = await policy.generate(prompt, SamplingParams(max_new_tokens=16, seed=1))
    mine = continuation_logprobs(model, [(prompt, list(out.token_ids))], pad_token_id=0)[0]
    assert max(abs(a - b) for a, b in zip(out.logprobs, mine, strict=True)) < 1e-5
    await policy.aclose()


def test_the_token_comes_from_the_environment_by_default(served, tiny_tokenizer, monkeypatch):
    url, _ = served
    monkeypatch.setenv("AGENTRL_WEIGHTS_TOKEN", TOKEN)
    policy = OpenAICompletionsPolicy.from_config(config(url), tiny_tokenizer, source_model=learner())
    assert policy.weight_sync.version == 1


def test_a_lora_learner_sends_the_merged_weights_of_the_adapted_modules_only(served, tiny_tokenizer):
    from peft import LoraConfig, get_peft_model

    url, _ = served
    model = get_peft_model(learner(), LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:  # B starts at zero: give the adapters something to say
                p.copy_(torch.randn(p.shape, generator=generator) * 0.05)
    weights = learner_weights(model)
    assert sorted({n.rsplit(".", 2)[-2] for n in weights}) == ["q_proj", "v_proj"] and len(weights) == 8
    assert all(n.startswith("model.layers.") and ".lora_" not in n and "base_layer" not in n for n in weights)
    prompt = prompt_ids(tiny_tokenizer)
    assert gap(url, model, prompt) > 1e-3
    OpenAICompletionsPolicy.from_config(config(url, weight_sync_token=TOKEN), tiny_tokenizer, source_model=model)
    assert gap(url, model, prompt) < 1e-5
    base = model.get_base_model().model.layers[0].self_attn.q_proj.base_layer.weight
    assert torch.equal(base, learner().model.layers[0].self_attn.q_proj.weight)  # the learner's own weights untouched
