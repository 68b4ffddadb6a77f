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


@dataclass
class ScoreStats:
    """Counters of teacher-forced scoring (`score_continuations`): batched forward passes, rows, seconds."""

    forwards: int = 0
    rows: int = 0
    busy_s: float = 0.0


def continuation_logprobs(
    model: Any, rows: Sequence[tuple[list[int], list[int]]], pad_token_id: int
) -> list[list[float]]:
    """One right-padded forward over `prefix + continuation` rows; the log-probabilities of each continuation's
    tokens. Only the continuation positions go through log-softmax, so memory stays O(rows × continuation × V)."""
    import torch

    lengths = [len(p) + len(c) for p, c in rows]
    ids_B_T = torch.full((len(rows), max(lengths)), pad_token_id, dtype=torch.long)
    mask_B_T = torch.zeros_like(ids_B_T)
    for b, (prefix, cont) in enumerate(rows):
        if not prefix:
            raise ValueError("a continuation needs a non-empty prefix to be scored")
        ids_B_T[b, : lengths[b]] = torch.tensor(prefix + cont)
        mask_B_T[b, : lengths[b]] = 1
    device = next(model.parameters()).device
    with torch.inference_mode():
        logits_B_T_V = model(input_ids=ids_B_T.to(device), attention_mask=mask_B_T.to(device)).logits
    out = []
    for b, (prefix, cont) in enumerate(rows):
        # the token at position i is predicted by the logits at position i - 1
        logits_L_V = logits_B_T_V[b, len(prefix) - 1 : lengths[b] - 1].float()
        logp_L = torch.log_softmax(logits_L_V, dim=-1).gather(-1, torch.tensor(cont, device=device)[:, None])
        out.append(logp_L[:, 0].tolist())
    return out


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
        self.score_stats = ScoreStats()
        self._score_pending: list[tuple[list[tuple[list[int], list[int]]], asyncio.Future]] = []
        self._score_task: asyncio.Task | None = None

    async def score_continuations(
        self, prefixes: Sequence[Sequence[int]], continuations: Sequence[Sequence[int]]
    ) -> list[list[float]]:
        """Teacher-forced log-probabilities of each continuation's tokens after its prefix (prefill only).

        Requests from concurrent callers that arrive within `batch_wait_ms` share forward passes.
        """
        if len(prefixes) != len(continuations):
            raise ValueError("need one continuation per prefix")
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._score_pending.append(([(list(p), list(c)) for p, c in zip(prefixes, continuations, strict=True)], future))
        if self._score_task is None or self._score_task.done() or self._score_task.get_loop() is not loop:
            self._score_task = loop.create_task(self._drain_scores())
        return await future

    async def _drain_scores(self) -> None:
        await asyncio.sleep(self.batch_wait_s)
        while self._score_pending:
            pending, self._score_pending = self._score_pending, []
            rows = [row for request, _ in pending for row in request]
            try:
                scored = await asyncio.to_thread(self._score_rows, rows)
            except Exception as e:  # a failed batch fails its requests, not later ones
                for _, future in pending:
                    if not future.done():
                        future.set_exception(e)
                continue
            start = 0
            for request, future in pending:
                if not future.done():
                    future.set_result(scored[start : start + len(request)])
                start += len(request)

    def _score_rows(self, rows: list[tuple[list[int], list[int]]]) -> list[list[float]]:
        started = time.perf_counter()
        was_training = self.model.training
        self.model.eval()
        try:
            out = []
            for i in range(0, len(rows), self.max_batch_size):
                out += continuation_logprobs(self.model, rows[i : i + self.max_batch_size], self._pad)
                self.score_stats.forwards += 1
        finally:
            self.model.train(was_training)
        self.score_stats.rows += len(rows)
        self.score_stats.busy_s += time.perf_counter() - started
        return out

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
                    batch.append(
                        self._queue.get_nowait() if timeout <= 0 else await asyncio.wait_for(self._queue.get(), timeout)
                    )
                except (asyncio.QueueEmpty, asyncio.TimeoutError):
                    break
            try:
                completions = await asyncio.to_thread(self._run_batch, batch)
            except Exception as e:  # a failed batch fails its requests, not the worker
                for req in batch:
                    if not req.future.done():
                        req.future.set_exception(e)
                continue
            for req, completion in zip(batch, completions, strict=False):
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
                    text=decode(
                        row.token_ids[:-1] if row.finish_reason == "stop" else row.token_ids, skip_special_tokens=False
                    ),
                    finish_reason=row.finish_reason,  # type: ignore[arg-type]
                )
            )
        return out
