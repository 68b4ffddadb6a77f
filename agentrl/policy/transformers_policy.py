"""The in-process policy backend: a Hugging Face causal LM that batches concurrent requests.

Every trajectory calls `await policy.generate(prompt_ids, params)` on its own; requests that arrive while the
model is busy (or within `batch_wait_ms`) are sampled together in one KV-cached batch, so hundreds of
concurrent trajectories share forward passes without waiting for one another at turn boundaries. Sampling runs
in a worker thread, so tool calls of other trajectories proceed on the event loop meanwhile.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentrl.policy.sampler import sample_batch
from agentrl.protocols import SamplingParams
from agentrl.types import Completion


@dataclass
class _Request:
    prompt_ids: list[int]
    params: SamplingParams
    future: asyncio.Future
    seed: int


@dataclass
class SamplerStats:
    """Counters for throughput metrics (reset by the caller)."""

    tokens: int = 0
    batches: int = 0
    busy_s: float = 0.0
    rows: list[int] = field(default_factory=list)

    def reset(self) -> None:
        self.tokens, self.batches, self.busy_s, self.rows = 0, 0, 0.0, []


class TransformersPolicy:
    """A `Policy` over an in-process transformers model (shared with the learner: no weight copy to sync)."""

    def __init__(self, model: Any, tokenizer: Any, *, max_batch_size: int = 128, batch_wait_ms: float = 2.0):
        self.model = model
        self.tokenizer = tokenizer
        self.version = 0
        self.max_batch_size = max_batch_size
        self.batch_wait_s = batch_wait_ms / 1000
        self.stats = SamplerStats()
        self._queue: asyncio.Queue[_Request] | None = None
        self._worker: asyncio.Task | None = None
        self._eos = {tokenizer.convert_tokens_to_ids(tokenizer.eos_token)}
        pad = tokenizer.pad_token_id
        self._pad = pad if pad is not None else next(iter(self._eos))
        self._seed_counter = 0

    async def generate(self, prompt_ids: Sequence[int], params: SamplingParams) -> Completion:
        self._ensure_worker()
        assert self._queue is not None
        if params.seed is None:
            self._seed_counter += 1
            seed = hash((id(self), self._seed_counter)) & (2**62 - 1)
        else:
            seed = params.seed
        future = asyncio.get_running_loop().create_future()
        await self._queue.put(_Request(list(prompt_ids), params, future, seed))
        return await future

    def sync_weights(self) -> None:
        """The learner updated the shared model in place: only the version moves."""
        self.version += 1

    async def aclose(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            try:
                await self._worker
            except asyncio.CancelledError:
                pass
            self._worker = None
            self._queue = None

    # --- internals -------------------------------------------------------------------------------------

    def _ensure_worker(self) -> None:
        loop = asyncio.get_running_loop()
        if self._worker is None or self._worker.done() or self._worker.get_loop() is not loop:
            self._queue = asyncio.Queue()
            self._worker = loop.create_task(self._serve())

    async def _serve(self) -> None:
        assert self._queue is not None
        while True:
            batch = [await self._queue.get()]
            deadline = time.monotonic() + self.batch_wait_s
            while len(batch) < self.max_batch_size:
                timeout = deadline - time.monotonic()
                try:
                    batch.append(self._queue.get_nowait() if timeout <= 0 else await asyncio.wait_for(self._queue.get(), timeout))
                except (asyncio.QueueEmpty, asyncio.TimeoutError):
                    break
            try:
                completions = await asyncio.to_thread(self._run_batch, batch)
            except Exception as e:  # a failed batch fails its requests, not the worker
                for req in batch:
                    if not req.future.done():
                        req.future.set_exception(e)
                continue
            for req, completion in zip(batch, completions):
                if not req.future.done():
                    req.future.set_result(completion)

    def _run_batch(self, batch: list[_Request]) -> list[Completion]:
        start = time.perf_counter()
        stop_strings = [req.params.stop for req in batch]
        decode = self.tokenizer.decode

        def stop_hit(row: int, ids: list[int]) -> bool:
            stops = stop_strings[row]
            if not stops:
                return False
            tail = decode(ids[-8:], skip_special_tokens=False)
            return any(tail.endswith(s) for s in stops)

        was_training = self.model.training
        self.model.eval()
        try:
            rows = sample_batch(
                self.model,
                [req.prompt_ids for req in batch],
                [req.params for req in batch],
                eos_token_ids=self._eos,
                pad_token_id=self._pad,
                stop_hit=stop_hit,
                seeds=[req.seed for req in batch],
            )
        finally:
            self.model.train(was_training)
        self.stats.busy_s += time.perf_counter() - start
        self.stats.batches += 1
        self.stats.rows.append(len(batch))
        out = []
        for row in rows:
            self.stats.tokens += len(row.token_ids)
            out.append(
                Completion(
                    token_ids=tuple(row.token_ids),
                    logprobs=tuple(row.logprobs),
                    entropies=tuple(row.entropies),
                    # the end-of-turn token is markup, not content
                    text=decode(row.token_ids[:-1] if row.finish_reason == "stop" else row.token_ids,
                                skip_special_tokens=False),
                    finish_reason=row.finish_reason,  # type: ignore[arg-type]
                )
            )
        return out
