"""`policy.backend=vllm` against vLLM's engine in this process: sampled tokens and their log-probabilities agree
with the learner, weight updates (full and LoRA) reach the engine through vLLM's own reload path, and what goes
wrong in vLLM ends the trajectory as an infrastructure failure. One engine serves the whole module; the test that
kills it runs last."""

from __future__ import annotations

import asyncio
import copy
import os
import signal
from types import SimpleNamespace

import pytest
import torch

pytestmark = pytest.mark.vllm
pytest.importorskip("vllm", reason="the vllm tier runs in the vLLM environment (scripts/setup_vllm.sh)")

from agentrl.errors import InfraError, SamplerError  # noqa: E402
from agentrl.policy import resolve_model_path  # noqa: E402
from agentrl.policy.config import VLLMConfig  # noqa: E402
from agentrl.policy.vllm_policy import VLLMPolicy  # noqa: E402
from agentrl.protocols import SamplingParams  # noqa: E402

MAX_MODEL_LEN = 512
TOLERANCE = 1e-4
"""A float32 engine and a float32 learner differ by kernel rounding alone."""


def learner_logprobs(model, prompt: list[int], completion, temperature: float = 1.0) -> torch.Tensor:
    """The learner's log-probabilities of the sampled tokens, under the tempered distribution."""
    ids = torch.tensor([prompt + list(completion.token_ids)])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1 : -1].float() / temperature
    return torch.log_softmax(logits, -1).gather(-1, ids[0, len(prompt) :, None])[:, 0]


def gap(model, prompt: list[int], completions, temperature: float = 1.0) -> float:
    """The largest |learner − sampler| log-probability over every sampled token of `completions`."""
    worst = 0.0
    for completion in completions:
        served = torch.tensor(completion.logprobs)
        worst = max(worst, (learner_logprobs(model, prompt, completion, temperature) - served).abs().max().item())
    return worst


def chat_prompt(tokenizer) -> list[int]:
    """The ids of a user turn asking for the calculator, the assistant's turn opened."""
    messages = [{"role": "user", "content": "What is 17 + 25? Use the calculator."}]
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def run_all(loop, coroutines) -> list:
    """Run `coroutines` concurrently on `loop` (not running) and return their results."""

    async def together():
        return await asyncio.gather(*coroutines)

    return loop.run_until_complete(together())


def perturb(model, seed: int, scale: float = 0.05) -> None:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(scale * torch.randn(p.shape, generator=generator))


@pytest.fixture(scope="module")
def served(tiny_tokenizer):
    from transformers import AutoModelForCausalLM

    path = resolve_model_path("tiny")
    learner = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    settings = VLLMConfig(max_model_len=MAX_MODEL_LEN, enforce_eager=True)
    policy = VLLMPolicy(path, tiny_tokenizer, source_model=learner, settings=settings, dtype="float32")
    loop = asyncio.new_event_loop()  # the trainer's loop: the policy's synchronous methods run on it
    loop.run_until_complete(policy.start())
    prompt = chat_prompt(tiny_tokenizer)
    yield SimpleNamespace(policy=policy, learner=learner, loop=loop, prompt=prompt, path=path)
    loop.run_until_complete(policy.aclose())
    loop.close()


def sample(served, policy=None, n: int = 6, temperature: float = 1.0, prompt=None) -> list:
    policy = policy or served.policy
    params = SamplingParams(max_new_tokens=24, temperature=temperature, seed=7)  # the rollout seeds every turn
    return run_all(served.loop, [policy.generate(prompt or served.prompt, params) for _ in range(n)])


def test_sampled_tokens_and_logprobs_agree_with_the_learner(served):
    assert served.policy.per_request_seeds is False  # vLLM's CPU build: seeds stay out of its sampler
    completions = sample(served)
    assert all(c.token_ids and len(c.logprobs) == len(c.token_ids) for c in completions)
    assert len({c.token_ids for c in completions}) > 1  # sampled at T = 1, not greedy
    assert gap(served.learner, served.prompt, completions) < TOLERANCE
    tempered = sample(served, temperature=0.6)  # processed log-probabilities: the tempered distribution's
    assert gap(served.learner, served.prompt, tempered, temperature=0.6) < TOLERANCE


def test_a_weight_update_reaches_the_engine_through_vllms_reload(served):
    before = sample(served, n=2)
    perturb(served.learner, seed=1)
    assert gap(served.learner, served.prompt, before) > 1e-2  # the probe tells the two weights apart
    served.policy.sync_weights()  # between phases: the loop is not running
    assert served.policy.version == 1
    assert gap(served.learner, served.prompt, sample(served)) < TOLERANCE


def test_weights_noted_on_the_engines_running_loop_load_before_the_next_sample(served):
    # a Ray rollout worker calls refresh_weights from an async actor method, on the engine's own loop
    async def actor_method():
        perturb(served.learner, seed=2)
        served.policy.refresh_weights()
        await served.policy.start()
        params = SamplingParams(max_new_tokens=24)
        return await asyncio.gather(*[served.policy.generate(served.prompt, params) for _ in range(4)])

    assert gap(served.learner, served.prompt, served.loop.run_until_complete(actor_method())) < TOLERANCE


def test_a_lora_learner_updates_the_engine_without_copying_the_model(served, tiny_tokenizer, monkeypatch):
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(
        copy.deepcopy(served.learner), LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
    )
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.3)
    lora = VLLMPolicy(
        served.path,
        tiny_tokenizer,
        source_model=model,
        engine_factory=lambda kwargs: served.policy._engine,  # the module's engine
    )
    served.loop.run_until_complete(lora.start())

    def no_copy(*args, **kwargs):
        raise AssertionError("the LoRA learner was copied to merge it")

    monkeypatch.setattr(copy, "deepcopy", no_copy)
    lora.sync_weights()
    monkeypatch.undo()
    assert gap(model, served.prompt, sample(served, policy=lora)) < TOLERANCE
    assert gap(served.learner, served.prompt, sample(served, policy=lora, n=2)) > 1e-2  # the adapters count


def test_a_prompt_longer_than_the_engine_serves_is_an_infrastructure_failure(served):
    too_long = served.prompt * (MAX_MODEL_LEN // len(served.prompt) + 1)
    with pytest.raises(SamplerError, match=r"serves at most 512 \(policy.vllm.max_model_len") as caught:
        sample(served, n=1, prompt=too_long)
    assert isinstance(caught.value, InfraError)
    assert len(sample(served, n=1)) == 1  # the engine serves on


def test_a_killed_engine_fails_the_trajectories_in_flight_and_every_later_one(served):
    import psutil

    params = SamplingParams(max_new_tokens=400)

    async def in_flight():
        tasks = [asyncio.ensure_future(served.policy.generate(served.prompt, params)) for _ in range(32)]
        await asyncio.sleep(0.02)  # submitted, not finished: the tiny policy ends a turn in a few tokens
        (core,) = [p for p in psutil.Process().children(recursive=True) if "EngineCore" in " ".join(p.cmdline())]
        os.kill(core.pid, signal.SIGKILL)
        return await asyncio.gather(*tasks, return_exceptions=True)

    outcomes = served.loop.run_until_complete(in_flight())
    failed = [o for o in outcomes if isinstance(o, BaseException)]
    assert failed and all(isinstance(o, SamplerError) for o in failed), outcomes
    with pytest.raises(SamplerError, match="the vLLM engine died"):
        sample(served, n=1)
