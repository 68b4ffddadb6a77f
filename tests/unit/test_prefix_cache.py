"""Prefix reuse: a trajectory's next turn and a group's identical prompts prefill only what is new, and sample
exactly what they would have sampled without reuse (the learner's teacher-forced log-probs agree to ~1e-6)."""

from __future__ import annotations

import asyncio
import random

import pytest
import torch

from agentrl.policy.decode_loop import DecodeLoop
from agentrl.policy.prefix_cache import BLOCK, PrefixCache
from agentrl.policy.transformers_policy import TransformersPolicy, continuation_logprobs
from agentrl.protocols import SamplingParams
from agentrl.testing.families import family_model
from agentrl.tiny.model import PAD_ID

pytestmark = pytest.mark.unit

PARAMS = SamplingParams(max_new_tokens=10, temperature=1.0)


@pytest.fixture(scope="module")
def model(small_qwen2):
    return small_qwen2


class Fed:
    """Counts the positions fed to a model (prefill padding included)."""

    def __init__(self, model):
        self.tokens = 0
        self._hook = model.register_forward_pre_hook(self._count, with_kwargs=True)

    def _count(self, _module, _args, kwargs):
        self.tokens += kwargs["input_ids"].numel()

    def close(self):
        self._hook.remove()


def run(loop: DecodeLoop, requests) -> dict:
    results = dict(loop.add(requests))
    while len(loop):
        results.update(loop.step())
    return results


def test_the_next_turn_prefills_only_what_its_tool_added(model):
    prompt = list(range(10, 50))
    reused = DecodeLoop(model, eos_token_ids=set(), pad_token_id=PAD_ID, prefix_cache_tokens=4096)
    fresh = DecodeLoop(model, eos_token_ids=set(), pad_token_id=PAD_ID)
    first = run(reused, [("a", prompt, PARAMS, 1)])["a"]
    assert first.token_ids == run(fresh, [("a", prompt, PARAMS, 1)])["a"].token_ids
    turn = prompt + first.token_ids + [7, 8, 9]  # the tool's answer
    fed = Fed(model)
    second = run(reused, [("a", turn, PARAMS, 2)])["a"]
    fed.close()
    # the last sampled token (never fed) and the tool's three, then one per decoding step
    assert fed.tokens == 4 + (len(second.token_ids) - 1)
    alone = run(fresh, [("a", turn, PARAMS, 2)])["a"]
    assert second.token_ids == alone.token_ids
    assert second.logprobs == pytest.approx(alone.logprobs, abs=1e-5)


def test_a_groups_identical_prompts_are_prefilled_once(model):
    prompt = list(range(60, 100))
    loop = DecodeLoop(model, eos_token_ids=set(), pad_token_id=PAD_ID, prefix_cache_tokens=4096)
    fed = Fed(model)
    loop.add([(g, prompt, SamplingParams(max_new_tokens=5, temperature=1.0), g) for g in range(4)])
    fed.close()
    assert fed.tokens == (len(prompt) - 1) + 4  # the shared part once, then each member's last prompt token
    results = run(loop, [])
    assert sorted(results) == [0, 1, 2, 3] and len({tuple(r.token_ids) for r in results.values()}) > 1


def test_prompts_sharing_a_system_prompt_prefill_it_once(model):
    system = list(range(100, 164))
    prompts = [system + [5 + r] * (r + 2) for r in range(4)]
    loop = DecodeLoop(model, eos_token_ids=set(), pad_token_id=PAD_ID, prefix_cache_tokens=4096)
    fed = Fed(model)
    loop.add([(r, p, PARAMS, r) for r, p in enumerate(prompts)])
    fed.close()
    longest_rest = max(len(p) - len(system) for p in prompts)
    assert fed.tokens == len(system) + len(prompts) * longest_rest  # the rests are left-padded to one length


@pytest.mark.parametrize("family", ["qwen3", "llama3", "mistral"])
def test_sampler_logprobs_agree_with_the_learners_across_joins_leaves_and_reuse(family):
    model = family_model(family)[0].eval()
    vocab = model.config.vocab_size
    rng = random.Random(0)
    system = [rng.randrange(vocab) for _ in range(40)]
    prompts = [system + [rng.randrange(vocab) for _ in range(rng.randrange(1, 20))] for _ in range(4)]
    prompts += [prompts[0]] * 2  # a group
    loop = DecodeLoop(model, eos_token_ids=set(), pad_token_id=PAD_ID, prefix_cache_tokens=4096)
    params = [SamplingParams(max_new_tokens=6 + r, temperature=1.0) for r in range(len(prompts))]
    results = dict(loop.add([(r, prompts[r], params[r], r) for r in range(3)]))
    results.update(loop.step())
    results.update(loop.add([(r, prompts[r], params[r], r) for r in range(3, len(prompts))]))  # join mid-decode
    while len(loop):
        results.update(loop.step())
    turns = {r: prompts[r] + results[r].token_ids + [11, 12] for r in results}
    again = run(loop, [(r, turns[r], PARAMS, 100 + r) for r in turns])
    assert loop.prefix.stats.hits >= len(turns)
    gap = 0.0
    for context, result in [(prompts[r], results[r]) for r in results] + [(turns[r], again[r]) for r in again]:
        learner = continuation_logprobs(model, [(context, result.token_ids)], PAD_ID)[0]
        gap = max(gap, max(abs(a - b) for a, b in zip(learner, result.logprobs, strict=True)))
    assert gap < 1e-5


def test_parked_prefixes_stay_within_their_budget_least_recently_used_first():
    kv = [(torch.zeros(1, 1, 1), torch.zeros(1, 1, 1))]
    cache = PrefixCache(budget_tokens=100)
    a, b, c = [list(range(s, s + 40)) for s in (1000, 2000, 3000)]
    cache.park(a, kv)
    cache.park(b, kv)
    assert cache.lookup(a + [1])[1] == 40  # a was used: b is now the least recent
    cache.park(c, kv)
    assert cache.tokens <= 100 and cache.stats.evicted == 1
    assert cache.match(b)[0] is None and cache.match(a)[1] == 40 and cache.match(c)[1] == 40
    # a longer row that extends `a` replaces it: it serves every prompt `a` served
    cache.park(a + list(range(5, 25)), kv)
    assert len(cache) == 2 and cache.match(a)[1] == 40 and cache.tokens == 100
    # a prompt shorter than a block is never looked up; a lookup always leaves one id to feed
    assert cache.lookup(a[: BLOCK - 1]) == (None, 0) and cache.lookup(a)[1] == 39


async def test_new_weights_drop_the_parked_prefixes(model, tiny_tokenizer):
    policy = TransformersPolicy(model, tiny_tokenizer)
    prompt = list(range(10, 50))
    first = await policy.generate(prompt, SamplingParams(max_new_tokens=4, seed=1))
    turn = prompt + list(first.token_ids) + [7]
    await policy.generate(turn, SamplingParams(max_new_tokens=4, seed=2))
    hits = policy.prefix_stats.hits
    assert hits >= 1
    policy.sync_weights()
    await policy.generate(turn + [8], SamplingParams(max_new_tokens=4, seed=3))
    assert policy.prefix_stats.hits == hits  # what was parked under the old weights is gone


async def test_release_memory_drops_the_parked_prefixes_and_the_slots(model, tiny_tokenizer):
    policy = TransformersPolicy(model, tiny_tokenizer)
    prompt = list(range(10, 50))
    first = await policy.generate(prompt, SamplingParams(max_new_tokens=4, seed=1))
    while policy.stats.busy_s == 0.0:  # set when the decoding session has ended
        await asyncio.sleep(0.001)
    loop = policy._decode_loop()
    assert len(loop.prefix) == 1 and not loop.cache.allocated  # parked; the slots went when the session ended
    policy.release_memory()
    assert len(loop.prefix) == 0 and loop.prefix.tokens == 0
    await policy.generate(prompt + list(first.token_ids) + [7], SamplingParams(max_new_tokens=4, seed=2))
    assert policy.prefix_stats.hits == 0
