"""`agentrl bench learner`: peak memory of the learner's loss over a vocabulary-sized output layer, chunked vs one pass.

What runs: final hidden states (tokens × hidden) through the output projection (vocab × hidden) to each token's
log-probability with its gradient and the entropy as a metric (the learner's default, `entropy_coef = 0`; see
`--entropy`), forward and backward: the part of a learner step whose memory grows with the vocabulary. Two
variants, measured side by side in one run, each in its own subprocess:

- `full`: the one-pass path (`trainer.logprob_chunk_tokens=0`), fp32 logits of every token at once;
- `chunked`: `chunked_logprobs_N` over `--chunk` tokens at a time.

How memory is measured:

- `--device cpu`: no memory is allocated. The variant runs on fake tensors (`FakeTensorMode`: shapes and dtypes,
  no data) under `LiveTensorBytes`, a dispatch-level tracker that adds the bytes of every tensor storage torch
  creates and subtracts them when the storage is freed; its peak is the peak of live tensor memory, so the 40 GB
  of the full variant at 16k tokens × 152k vocabulary can be measured on a small machine. Not counted: scratch
  memory a single kernel allocates and frees inside itself, and the allocator's own overhead (checked against
  peak RSS at 4k tokens × 32k vocabulary, where both fit: RSS is 20 to 30 MB higher for either variant).
- `--device cuda`: real tensors; `torch.cuda.max_memory_allocated` over the timed passes, and `wall_s`, the median
  of `TIMED_CALLS` forward and backward passes after one untimed warm-up (a fresh process's first pass mostly
  measures imports and kernel loading).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import weakref
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

TARGET_RATIO = 4.0
TIMED_CALLS = 3
"""Forward and backward passes timed on a GPU (the median is reported), after one untimed warm-up."""
VARIANTS = ("full", "chunked")


class LiveTensorBytes(TorchDispatchMode):
    """Counts the bytes of live tensor storages created inside it, and their peak."""

    def __init__(self) -> None:
        super().__init__()
        self.live_bytes = 0
        self.peak_bytes = 0
        self._live: set[int] = set()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for tensor in tree_leaves(out):
            if isinstance(tensor, torch.Tensor):
                self._track(tensor.untyped_storage())
        return out

    def _track(self, storage: torch.UntypedStorage) -> None:
        key = storage._cdata  # views and in-place results share their base's storage: counted once
        if key in self._live:
            return
        self._live.add(key)
        self.live_bytes += storage.nbytes()
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)
        weakref.finalize(storage, self._free, key, storage.nbytes())

    def _free(self, key: int, nbytes: int) -> None:
        self._live.discard(key)
        self.live_bytes -= nbytes


def run_benchmark(
    tokens: int = 16384,
    vocab: int = 151936,
    hidden: int = 256,
    chunk: int = 4096,
    device: str = "cpu",
    entropy: str = "value",
) -> dict[str, Any]:
    """Both variants, each in a fresh subprocess; JSON-ready results with the full / chunked ratio."""
    options = {"tokens": tokens, "vocab": vocab, "hidden": hidden, "chunk": chunk, "device": device}
    options["entropy"] = entropy
    results = {variant: _in_subprocess({**options, "variant": variant}) for variant in VARIANTS}
    ratio = results["full"]["peak_bytes"] / max(results["chunked"]["peak_bytes"], 1)
    return {
        **options,
        "measured_by": (
            "torch.cuda.max_memory_allocated"
            if device.startswith("cuda")
            else "live tensor bytes on fake tensors (nothing allocated)"
        ),
        "logits_fp32_gib": _gib(tokens * vocab * 4),
        **results,
        "full_over_chunked": round(ratio, 2),
        "target_ratio": TARGET_RATIO,
        "meets_target": ratio >= TARGET_RATIO,
    }


def measure(variant: str, tokens: int, vocab: int, hidden: int, chunk: int, device: str, entropy: str) -> dict:
    """Peak memory of one variant in this process (`run_benchmark` calls it in a subprocess per variant)."""
    if device.startswith("cuda"):
        # one untimed call first: the first one also pays for imports (torch._dynamo, by the checkpointed chunks),
        # kernel loading and the allocator's growth
        _loss_and_backward(variant, tokens, vocab, hidden, chunk, torch.device(device), entropy)
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        walls = []
        for _ in range(TIMED_CALLS):
            start = time.perf_counter()
            _loss_and_backward(variant, tokens, vocab, hidden, chunk, torch.device(device), entropy)
            torch.cuda.synchronize(device)
            walls.append(time.perf_counter() - start)
        peak = torch.cuda.max_memory_allocated(device)
        return {"peak_bytes": peak, "peak_gib": _gib(peak), "wall_s": round(sorted(walls)[len(walls) // 2], 4)}
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(), LiveTensorBytes() as tracker:
        _loss_and_backward(variant, tokens, vocab, hidden, chunk, torch.device(device), entropy)
    return {"peak_bytes": tracker.peak_bytes, "peak_gib": _gib(tracker.peak_bytes)}


def _loss_and_backward(
    variant: str, tokens: int, vocab: int, hidden: int, chunk: int, device: torch.device, entropy: str
) -> None:
    from agentrl.train.chunked_logprobs import chunked_logprobs_N, scaled_logits
    from agentrl.train.losses import entropy_from_logits, token_logprobs

    project = torch.nn.Linear(hidden, vocab, bias=False, device=device)
    hidden_N_H = torch.randn(tokens, hidden, device=device, requires_grad=True)
    targets_N = torch.randint(0, vocab, (tokens,), device=device)
    if variant == "chunked":
        logprobs_N, entropy_N = chunked_logprobs_N(hidden_N_H, targets_N, project, chunk_tokens=chunk, entropy=entropy)
    else:  # what forward.py computes with chunk_tokens = 0
        logits_N_V = scaled_logits(project(hidden_N_H), 1.0)
        logprobs_N, entropy_N = token_logprobs(logits_N_V, targets_N), None
        if entropy != "off":
            with torch.set_grad_enabled(entropy == "grad"):
                entropy_N = entropy_from_logits(logits_N_V)
        del logits_N_V
    loss = logprobs_N.sum()
    if entropy == "grad" and entropy_N is not None:
        loss = loss + 0.01 * entropy_N.sum()
    del logprobs_N, entropy_N
    loss.backward()


def _in_subprocess(options: dict[str, Any]) -> dict[str, Any]:
    command = [sys.executable, "-m", "agentrl.bench.learner_bench", json.dumps(options)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the {options['variant']} variant failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _gib(nbytes: int) -> float:
    return round(nbytes / 2**30, 3)


if __name__ == "__main__":  # one variant, as `_in_subprocess` runs it
    print(json.dumps(measure(**json.loads(sys.argv[1]))))
