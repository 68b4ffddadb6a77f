"""CPU proxies of the in-process sampler's speed on a GPU, as counts: host reads, aten ops and weight casts per step.

- Host reads (`item`, `tolist`, `cpu`, `numpy`, `bool`/`int`/`float`/`index` of a tensor) each wait for the device
  on a GPU. They are counted by patching `torch.Tensor` process-wide (the policy decodes in a worker thread, and
  dispatch modes are per thread), plus `_local_scalar_dense` and `nonzero` seen by a dispatch mode (reads made
  inside torch). A decoding step reads once, whatever its rows ask for and however many there are.
- Aten ops per decoding step (each one a kernel launch or at least a dispatch on a GPU) are compared with
  transformers' own `generate` on the same model and batch: a random Qwen3 of 28 layers, the depth of
  Qwen3-0.6B, so the per-layer ops weigh as they do in a real model. Both run under `inference_mode`, as the loop
  does without autocast (the mode changes which ops a dispatch mode sees), and generate's per-step count is the
  difference of two generation lengths, so its prefill and setup cancel out.
- No step copies the cache: the elements a step writes (outputs of ops that are not views; what an in-place op
  writes) do not grow with the context by as much as one row's keys and values of one layer.
- No parameter is cast during a step: the learner's autocast is entered once per decoding session, so its cast
  cache holds the bf16 weights from the first forward pass on.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from agentrl.policy.decode_loop import DecodeLoop, RowOptions
from agentrl.policy.transformers_policy import TransformersPolicy
from agentrl.protocols import SamplingParams
from agentrl.testing.families import family_model
from agentrl.tiny.model import PAD_ID, tiny_qwen2, tiny_qwen2_config

pytestmark = pytest.mark.unit

READS = ("item", "tolist", "cpu", "numpy", "__bool__", "__int__", "__float__", "__index__")


class HostReads:
    """Counts calls of tensor methods that read values back to the host, in every thread."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    def __enter__(self) -> HostReads:
        self._saved = {name: getattr(torch.Tensor, name) for name in READS}
        for name, method in self._saved.items():
            setattr(torch.Tensor, name, self._counting(name, method))
        return self

    def __exit__(self, *exc: object) -> None:
        for name, method in self._saved.items():
            setattr(torch.Tensor, name, method)

    def _counting(self, name, method):
        def counted(tensor, *args, **kwargs):
            self.calls[name] += 1
            return method(tensor, *args, **kwargs)

        return counted

    @property
    def total(self) -> int:
        return sum(self.calls.values())


class Ops(TorchDispatchMode):
    """Counts aten ops; reads made inside torch (`_local_scalar_dense`, `nonzero`) and casts of `parameters`."""

    def __init__(self, parameters=(), label=lambda: 0) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()
        self.written = 0
        """Elements written by ops that are not views (in-place ops: what they overwrite)."""
        self.casts: Counter[int] = Counter()
        """Casts of a parameter by `label()` at the time (the policy's step count)."""
        self._parameters = {p.untyped_storage().data_ptr() for p in parameters}
        self._label = label

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func)
        self.ops[name] += 1
        if name.startswith(("aten._to_copy", "aten.to.")) and self._is_parameter(args[0]):
            self.casts[self._label()] += 1
        out = func(*args, **(kwargs or {}))
        self.written += _written(func, args, out)
        return out

    def _is_parameter(self, x) -> bool:
        return isinstance(x, torch.Tensor) and x.untyped_storage().data_ptr() in self._parameters

    @property
    def total(self) -> int:
        return sum(self.ops.values())

    @property
    def syncing(self) -> int:
        return sum(n for name, n in self.ops.items() if "_local_scalar_dense" in name or "nonzero" in name)


def _written(func, args, out) -> int:
    if func.is_view:
        return 0
    name = func.__name__
    if name.startswith(("index_put_", "index_copy_", "scatter_")):
        return args[-1].numel() if isinstance(args[-1], torch.Tensor) else args[2].numel()
    if func._schema.is_mutable:
        return args[0].numel()
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return sum(o.numel() for o in outs if isinstance(o, torch.Tensor))


@pytest.fixture(scope="module")
def tiny():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield tiny_qwen2(tiny_qwen2_config(512, hidden_size=64, num_hidden_layers=2), seed=3).eval()
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def deep():
    return family_model("qwen3", layers=28, hidden_size=64)[0].eval()


def mixed_rows(n: int) -> tuple[list, list[RowOptions]]:
    """`n` requests with everything a row can ask for: greedy, top-p, top log-probs, forbidden ids, and lengths
    that end rows at different steps."""
    requests, options = [], []
    for r in range(n):
        params = SamplingParams(
            max_new_tokens=6 + r % 5, temperature=(0.0, 0.7, 1.0)[r % 3], top_p=(1.0, 0.9)[r % 2], seed=r
        )
        requests.append((r, [5 + r % 7, 6, 7, 8 + r % 11], params, r))
        options.append(RowOptions(top_logprobs=r % 3, forbid=(lambda ids: {3, 4}) if r % 4 == 0 else None))
    return requests, options


@pytest.mark.parametrize("rows", [1, 8, 32])
def test_a_decoding_step_reads_the_host_once_whatever_its_rows(tiny, rows):
    loop = DecodeLoop(tiny, eos_token_ids=set(), pad_token_id=PAD_ID, prefix_cache_tokens=4096)
    requests, options = mixed_rows(rows)
    with HostReads() as reads, Ops() as ops:
        loop.add(requests, options)
    assert reads.total == 1 and ops.syncing == 0  # a prefill, with its first sampled token
    steps = 0
    with HostReads() as reads, Ops() as ops:
        while len(loop):  # rows finish (and are parked) along the way
            loop.step()
            steps += 1
    assert steps >= 5
    assert reads.total == steps, reads.calls
    assert ops.syncing == 0, {k: v for k, v in ops.ops.items() if "nonzero" in k or "scalar" in k}


def test_a_decoding_steps_ops_do_not_grow_with_its_rows(tiny):
    def ops_per_step(rows: int) -> float:
        loop = DecodeLoop(tiny, eos_token_ids=set(), pad_token_id=PAD_ID)
        params = SamplingParams(max_new_tokens=50, temperature=1.0)
        loop.add([(r, [5, 6, 7, 8 + r], params, r) for r in range(rows)])
        loop.step()
        with Ops() as ops:
            for _ in range(4):
                loop.step()
        return ops.total / 4

    assert ops_per_step(32) <= ops_per_step(1)  # (equal but for views of a whole tensor, which torch skips)


def test_a_decoding_step_copies_no_cache(tiny):
    def written_per_step(context: int) -> float:
        loop = DecodeLoop(tiny, eos_token_ids=set(), pad_token_id=PAD_ID)
        params = SamplingParams(max_new_tokens=50, temperature=1.0)
        loop.add([(r, [5 + (i + r) % 400 for i in range(context)], params, r) for r in range(4)])
        loop.step()
        with Ops() as ops:
            for _ in range(4):
                loop.step()
        return ops.written / 4

    short, long = written_per_step(16), written_per_step(1000)
    config = tiny.config
    one_row_one_layer = 2 * config.num_key_value_heads * (config.hidden_size // config.num_attention_heads) * 984
    assert long - short < one_row_one_layer, (short, long)


def test_a_decoding_step_makes_no_more_ops_than_transformers_generate(deep):
    rows, prompt_len = 8, 16
    prompts = torch.randint(10, 2000, (rows, prompt_len), generator=torch.Generator().manual_seed(0))

    def generate_ops(new_tokens: int) -> Counter[str]:
        with torch.inference_mode(), Ops() as ops:  # as the loop runs without autocast
            deep.generate(
                prompts, attention_mask=torch.ones_like(prompts), do_sample=True, max_new_tokens=new_tokens,
                top_k=0, top_p=1.0, temperature=1.0, pad_token_id=PAD_ID,
            )  # fmt: skip
        return ops.ops

    short, long = generate_ops(3), generate_ops(8)
    theirs = (sum(long.values()) - sum(short.values())) / 5

    loop = DecodeLoop(deep, eos_token_ids=set(), pad_token_id=PAD_ID)
    params = SamplingParams(max_new_tokens=100, temperature=1.0)
    loop.add([(r, prompts[r].tolist(), params, r) for r in range(rows)])
    loop.step()
    with Ops() as ops:
        for _ in range(5):
            loop.step()
    ours = ops.total / 5
    # generate decodes these unpadded rows without a mask; the loop's rows need one. transformers releases without
    # `pack_gqa` (5.17, .venv-compat's) answer a masked SDPA call with `repeat_kv` of keys and values (at most 6
    # view/copy ops a layer) where later ones fold the query heads instead
    from transformers.integrations import sdpa_attention

    repeats = 0 if hasattr(sdpa_attention, "pack_gqa") else 6 * deep.config.num_hidden_layers
    assert ours <= 1.05 * theirs + repeats, (ours, theirs, repeats)


@contextlib.contextmanager
def autocast_counting(ops: Ops):
    """The learner's bf16 autocast with the op counter, both entered in the sampler's thread."""
    with torch.autocast("cpu", dtype=torch.bfloat16), ops:
        yield


async def test_no_weight_is_cast_in_a_decoding_step(tiny, tiny_tokenizer):
    policy = TransformersPolicy(tiny, tiny_tokenizer, compute=lambda: autocast_counting(ops))
    ops = Ops(tiny.parameters(), label=lambda: policy.stats.batches)
    prompts = [[5, 6, 7 + r] for r in range(4)]
    await asyncio.gather(
        *(policy.generate(p, SamplingParams(max_new_tokens=30, temperature=1.0, seed=r)) for r, p in enumerate(prompts))
    )
    assert policy.stats.batches >= 20
    # the first forward pass (the prefill, before step 1) casts every weight once; no decoding step casts any
    assert sum(ops.casts.values()) > 0
    assert set(ops.casts) == {0}, ops.casts
