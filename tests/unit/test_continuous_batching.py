"""Continuous batching: rows join a running decoding loop, and a row's samples never depend on its batch mates."""

import asyncio

import pytest
import torch

from agentrl.policy.decode_loop import DecodeLoop, sample_batch
from agentrl.policy.transformers_policy import TransformersPolicy
from agentrl.protocols import SamplingParams
from agentrl.tiny.model import EOS_ID, PAD_ID, tiny_qwen2, tiny_qwen2_config

pytestmark = pytest.mark.unit

PROMPTS = [[5, 6, 7], [8, 9, 10, 11, 12, 13, 14], [15], [16, 17, 18, 19]]
SEEDS = [11, 12, 13, 14]
PARAMS = SamplingParams(max_new_tokens=12, temperature=1.0)


@pytest.fixture(scope="module")
def model(small_qwen2):
    return small_qwen2


def alone(model, prompt, seed, params=PARAMS):
    return sample_batch(model, [prompt], [params], eos_token_ids={EOS_ID}, pad_token_id=PAD_ID, seeds=[seed])[0]


def test_a_row_samples_the_same_alone_and_in_a_batch(model):
    together = sample_batch(model, PROMPTS, [PARAMS] * 4, eos_token_ids={EOS_ID}, pad_token_id=PAD_ID, seeds=SEEDS)
    for prompt, seed, row in zip(PROMPTS, SEEDS, together, strict=True):
        single = alone(model, prompt, seed)
        assert row.token_ids == single.token_ids
        assert row.logprobs == pytest.approx(single.logprobs, abs=1e-4)
        assert row.entropies == pytest.approx(single.entropies, abs=1e-4)


def test_rows_that_join_mid_decode_sample_as_if_alone(model):
    batch = DecodeLoop(model, eos_token_ids={EOS_ID}, pad_token_id=PAD_ID)
    results, widths = {}, []
    for r, (prompt, seed) in enumerate(zip(PROMPTS, SEEDS, strict=True)):
        results.update(batch.add([(r, prompt, PARAMS, seed)]))  # one joiner per step, into a running batch
        results.update(batch.step())
        widths.append(len(batch))
    while len(batch):
        results.update(batch.step())
    assert max(widths) >= 3  # they really shared steps
    for r, (prompt, seed) in enumerate(zip(PROMPTS, SEEDS, strict=True)):
        assert results[r].token_ids == alone(model, prompt, seed).token_ids
    assert not batch.rows
    batch.release()
    assert not batch.cache.allocated  # nothing left behind


def test_a_leaving_row_moves_only_the_last_row_into_its_slot(model):
    short, long = SamplingParams(max_new_tokens=2), SamplingParams(max_new_tokens=10)
    batch = DecodeLoop(model, eos_token_ids=set(), pad_token_id=PAD_ID)
    batch.add([("first", [1, 2], long, 1), ("short", list(range(3, 40)), short, 2), ("last", [4, 5, 6], long, 3)])
    keys = batch.cache.keys[0]
    first_before = keys[0, :, :2].clone()  # the prompts' positions
    last_before = keys[2, :, :3].clone()
    done = batch.step()
    assert [key for key, _ in done] == ["short"] and [row.key for row in batch.rows] == ["first", "last"]
    assert batch.cache.keys[0] is keys  # the slots stay where they are: no cache is rebuilt
    assert torch.equal(keys[0, :, :2], first_before)  # the first row's slot is untouched
    assert torch.equal(keys[1, :, :3], last_before)  # the last row now lives in the short row's slot
    # a joiner takes the free slot after the live rows
    batch.add([("joiner", [7, 8], long, 4)])
    assert [row.key for row in batch.rows] == ["first", "last", "joiner"]


async def test_policy_admits_a_request_into_the_running_loop(model, tiny_tokenizer):
    long = SamplingParams(max_new_tokens=120, temperature=1.0, seed=1)
    short = SamplingParams(max_new_tokens=20, temperature=1.0, seed=2)

    async def run(continuous):
        policy = TransformersPolicy(model, tiny_tokenizer, continuous=continuous)
        first = asyncio.ensure_future(policy.generate([1, 2, 3], long))
        while policy.stats.batches < 3:  # the long request is decoding
            await asyncio.sleep(0.001)
        second = await policy.generate([4, 5], short)
        assert not first.done()  # the short request did not wait for the long one
        return await first, second, policy.stats

    (a, b, stats) = await run(True)
    assert len(a.token_ids) == 120 and stats.batches < len(a.token_ids) + len(b.token_ids)
    assert max(stats.rows) == 2
    assert list(b.token_ids) == alone(model, [4, 5], 2, short).token_ids
    assert list(a.token_ids) == alone(model, [1, 2, 3], 1, long).token_ids


def test_a_stop_string_ends_only_its_own_row(model):
    params = SamplingParams(max_new_tokens=10, temperature=1.0)
    batch = DecodeLoop(
        model, eos_token_ids=set(), pad_token_id=PAD_ID, stop_hit=lambda key, _params, ids: key == "a" and len(ids) == 3
    )
    results = dict(batch.add([("a", [1, 2], params, 1), ("b", [3, 4], params, 2)]))
    while len(batch):
        results.update(batch.step())
    assert results["a"].finish_reason == "tool_call" and len(results["a"].token_ids) == 3
    assert results["b"].finish_reason == "length" and len(results["b"].token_ids) == 10


async def test_a_cancelled_request_leaves_the_decoding_loop(model, tiny_tokenizer):
    policy = TransformersPolicy(model, tiny_tokenizer)
    request = asyncio.ensure_future(policy.generate([1, 2, 3], SamplingParams(max_new_tokens=400, seed=1)))
    while policy.stats.batches < 3:
        await asyncio.sleep(0.001)
    request.cancel()
    while policy.stats.busy_s == 0.0:  # set when the decoding loop has nothing left and returns
        await asyncio.sleep(0.001)
    assert policy.stats.batches < 100 and policy.stats.tokens == 0  # dropped long before its 400 tokens


async def test_a_failed_decoding_step_is_a_sampler_error_and_the_sampler_goes_on(model, tiny_tokenizer):
    from agentrl.errors import InfraError, SamplerError

    policy = TransformersPolicy(model, tiny_tokenizer)
    with pytest.raises(SamplerError, match="decoding failed: IndexError") as raised:
        await policy.generate([1, 10_000], SamplingParams(max_new_tokens=4, seed=1))  # id past the vocabulary
    assert isinstance(raised.value, InfraError)
    completion = await policy.generate([1, 2, 3], SamplingParams(max_new_tokens=4, seed=1))
    assert 0 < len(completion.token_ids) <= 4


async def test_a_loop_that_cannot_start_fails_its_requests_instead_of_leaving_them_waiting(tiny_tokenizer):
    from agentrl.errors import SamplerError

    model = tiny_qwen2(tiny_qwen2_config(512, hidden_size=64, num_hidden_layers=2), seed=3).eval()
    model.config._attn_implementation = "paged|sdpa"  # attention the slot cache refuses, found when the loop starts
    policy = TransformersPolicy(model, tiny_tokenizer)
    requests = [policy.generate([1, 2, 3], SamplingParams(max_new_tokens=4, seed=s)) for s in range(3)]
    for outcome in await asyncio.wait_for(asyncio.gather(*requests, return_exceptions=True), timeout=30):
        assert isinstance(outcome, SamplerError) and "sdpa or eager" in str(outcome), outcome


def test_the_learners_packing_wrapper_samples_as_the_attention_it_wraps(model):
    from agentrl.train.packed_attention import enable_packing

    before = [alone(model, prompt, seed) for prompt, seed in zip(PROMPTS, SEEDS, strict=True)]
    packed = tiny_qwen2(tiny_qwen2_config(512, hidden_size=64, num_hidden_layers=2), seed=3).eval()
    assert enable_packing(packed)  # the learner switches the shared model once, for good
    after = [alone(packed, prompt, seed) for prompt, seed in zip(PROMPTS, SEEDS, strict=True)]
    assert [r.token_ids for r in after] == [r.token_ids for r in before]
    for a, b in zip(after, before, strict=True):
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True)) < 1e-6


def test_the_cache_goes_under_the_keyword_this_transformers_takes(model):
    """Under the keyword the installed transformers deprecated, decoding would warn on every call and break
    once the old name is dropped; through a PEFT wrapper it goes to the base model's keyword too."""
    import warnings

    from peft import LoraConfig, get_peft_model

    lora = get_peft_model(
        tiny_qwen2(tiny_qwen2_config(512, hidden_size=64, num_hidden_layers=2), seed=3).eval(),
        LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj"]),
    )
    for m in (model, lora):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            alone(m, PROMPTS[1], SEEDS[1])
        assert not [w for w in caught if "deprecated" in str(w.message)], [str(w.message) for w in caught]
    # LoRA's B starts at zero, so the wrapped model samples exactly what its base does
    assert alone(lora, PROMPTS[1], SEEDS[1]).token_ids == alone(model, PROMPTS[1], SEEDS[1]).token_ids
