"""The in-process policy backend: a Hugging Face causal LM that batches concurrent requests.

Every trajectory calls `await policy.generate(prompt_ids, params)` on its own. Generation is continuously
batched: one KV-cached decoding loop serves every live request, a request that arrives while it runs is
prefilled and joins at the next step, and a finished row leaves at once (`agentrl/policy/decode_loop.py`). So
hundreds of concurrent trajectories share forward passes without waiting for one another at turn boundaries.
The loop runs in a worker thread, so tool calls of other trajectories proceed on the event loop meanwhile.
`continuous=False` admits new requests only when the loop is empty (static batches, for comparison).

The loop outlives its decoding sessions: finished rows' keys and values stay parked (up to
`prefix_cache_tokens` positions) so that a trajectory's next turn prefills only what its tool added, until the
weights change (`sync_weights`, or a new `version`). The learner's compute context (`compute`, e.g. its autocast)
is entered once per decoding session, not per step, so whatever it caches (autocast's casts of the weights)
lives as long as the session.

`generate` also streams: `on_token` sees every sampled token (a `TokenStep`, on the caller's event loop, before the
completion resolves), with the `top_logprobs` most likely alternatives when asked; `forbid` keeps ids out of the
sample. None of them changes what is sampled for a request that does not forbid anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentrl.errors import InputError, SamplerError
from agentrl.policy.decode_loop import PLAIN, DecodeLoop, RowOptions, RowResult, TokenStep
from agentrl.policy.request_merger import RequestMerger
from agentrl.policy.stop_strings import StopStrings
from agentrl.protocols import SamplingParams
from agentrl.types import Completion


@dataclass(eq=False)
class _Request:
    prompt_ids: list[int]
    params: SamplingParams
    future: asyncio.Future
    seed: int
    loop: asyncio.AbstractEventLoop
    options: RowOptions = PLAIN


@dataclass
class SamplerStats:
    """Counters for throughput metrics (reset by the caller)."""

    tokens: int = 0
    batches: int = 0
    """Decoding steps (one forward pass over the live rows each)."""
    prefills: int = 0
    """Forward passes that prefilled joining prompts."""
    busy_s: float = 0.0
    rows: list[int] = field(default_factory=list)
    """Live rows of each decoding step."""

    def reset(self) -> None:
        self.tokens, self.batches, self.prefills, self.busy_s, self.rows = 0, 0, 0, 0.0, []


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

    streams_tokens = True
    """`generate` takes `on_token`, `top_logprobs` and `forbid` (what `agentrl serve` streams and constrains with)."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        max_batch_size: int = 128,
        batch_wait_ms: float = 2.0,
        continuous: bool = True,
        eos_token_ids: Iterable[int] = (),
        compute: Callable[[], contextlib.AbstractContextManager[object]] = contextlib.nullcontext,
        prefix_cache_tokens: int = 32768,
    ):
        from agentrl.policy.loading import check_in_process_sampler

        check_in_process_sampler(model.config)
        self.model = model
        self.tokenizer = tokenizer
        self.version = 0
        self.max_batch_size = max_batch_size
        self.batch_wait_s = batch_wait_ms / 1000
        self.stats = SamplerStats()
        self.continuous = continuous
        self._inbox: deque[_Request] = deque()
        self._lock = threading.Lock()
        self._wakeup: asyncio.Event | None = None
        self._worker: asyncio.Task | None = None
        # every id that ends a turn (a generation config may list several), else the tokenizer's end of sequence
        self._eos = set(eos_token_ids) or {tokenizer.convert_tokens_to_ids(tokenizer.eos_token)}
        # the learner's autocast, entered in the sampler's own thread (autocast state is per thread), so the
        # sampler's log-probs describe the distribution the learner computes
        self._compute = compute
        pad = tokenizer.pad_token_id
        self._pad = pad if pad is not None else next(iter(self._eos))
        self.prefix_cache_tokens = prefix_cache_tokens
        self._stops = StopStrings(tokenizer)
        self._loop: DecodeLoop | None = None
        self._loop_version = 0
        self._decoding = False
        self._stale = False
        self._seed_counter = 0
        self.score_stats = ScoreStats()
        self._scores = RequestMerger(self._score_rows, self.batch_wait_s)

    async def score_continuations(
        self, prefixes: Sequence[Sequence[int]], continuations: Sequence[Sequence[int]]
    ) -> list[list[float]]:
        """Teacher-forced log-probabilities of each continuation's tokens after its prefix (prefill only).

        Requests from concurrent callers that arrive within `batch_wait_ms` share forward passes.
        """
        if len(prefixes) != len(continuations):
            raise ValueError("need one continuation per prefix")
        return await self._scores.submit([(list(p), list(c)) for p, c in zip(prefixes, continuations, strict=True)])

    def _score_rows(self, rows: list[tuple[list[int], list[int]]]) -> list[list[float]]:
        started = time.perf_counter()
        was_training = self.model.training
        self.model.eval()
        try:
            out = []
            for i in range(0, len(rows), self.max_batch_size):
                with self._compute():
                    out += continuation_logprobs(self.model, rows[i : i + self.max_batch_size], self._pad)
                self.score_stats.forwards += 1
        finally:
            self.model.train(was_training)
        self.score_stats.rows += len(rows)
        self.score_stats.busy_s += time.perf_counter() - started
        return out

    async def generate(
        self,
        prompt_ids: Sequence[int],
        params: SamplingParams,
        *,
        on_token: Callable[[TokenStep], None] | None = None,
        top_logprobs: int = 0,
        forbid: Callable[[list[int]], Collection[int]] | None = None,
    ) -> Completion:
        """Sample one continuation. `on_token(step)` runs on this event loop for every token as it is sampled, with
        the `top_logprobs` most likely ids of the sampling distribution; `forbid(ids)` names the ids the next
        token may not be (called in the decoding thread)."""
        if not prompt_ids:
            raise InputError("generate needs a prompt of at least one token")
        self._ensure_worker()
        assert self._wakeup is not None
        if params.seed is None:
            self._seed_counter += 1
            seed = hash((id(self), self._seed_counter)) & (2**62 - 1)
        else:
            seed = params.seed
        loop = asyncio.get_running_loop()
        listener = None if on_token is None else _on_loop(loop, on_token)
        options = RowOptions(top_logprobs, listener, forbid)
        request = _Request(list(prompt_ids), params, loop.create_future(), seed, loop, options)
        with self._lock:
            self._inbox.append(request)
        self._wakeup.set()
        return await request.future

    def sync_weights(self) -> None:
        """The learner updated the shared model in place: only the version moves."""
        self.version += 1

    def release_memory(self) -> None:
        """Drop the parked prefixes and free the cache's slots now, before something else needs the memory (the
        learner's update: what was parked describes weights about to change). While a decoding session runs, its
        next step drops them instead."""
        with self._lock:
            self._stale = True
            if not self._decoding and self._loop is not None:
                self._loop.forget()
                self._loop.release()
                self._stale = False

    async def aclose(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            try:
                await self._worker
            except asyncio.CancelledError:
                pass
            self._worker = None
            self._wakeup = None

    # --- internals -------------------------------------------------------------------------------------

    def _ensure_worker(self) -> None:
        loop = asyncio.get_running_loop()
        if self._worker is None or self._worker.done() or self._worker.get_loop() is not loop:
            self._wakeup = asyncio.Event()
            self._worker = loop.create_task(self._serve())

    async def _serve(self) -> None:
        assert self._wakeup is not None
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            await asyncio.sleep(self.batch_wait_s)  # let a burst of requests share the first prefill
            try:
                await asyncio.to_thread(self._decode_until_idle)
            except Exception as e:  # the loop could not even start: fail what waits, never leave it waiting
                self._fail_waiting(e)
            with self._lock:
                if self._inbox:
                    self._wakeup.set()

    def _fail_waiting(self, error: Exception) -> None:
        failed = SamplerError(f"the sampler could not decode: {type(error).__name__}: {error}")
        failed.__cause__ = error
        with self._lock:
            waiting, self._inbox = list(self._inbox), deque()
        if self._loop is not None:
            waiting += [row.key for row in self._loop.rows]
        self._loop = None
        for request in waiting:
            request.loop.call_soon_threadsafe(_settle, request.future, None, failed)

    @property
    def prefix_stats(self) -> Any:
        """What the parked prefixes saved (`PrefixStats`: hits, reused tokens, parked, evicted)."""
        return self._decode_loop().prefix.stats

    def _decode_loop(self) -> DecodeLoop:
        if self._loop is None:
            self._loop = DecodeLoop(
                self.model,
                eos_token_ids=self._eos,
                pad_token_id=self._pad,
                stop_hit=lambda _request, params, ids: self._stops.hit(params.stop, ids),
                prefix_cache_tokens=self.prefix_cache_tokens,
            )
            self._loop_version = self.version
        return self._loop

    def _decode_until_idle(self) -> None:
        """The decoding loop (worker thread): admit waiting requests between steps until nothing is live."""
        batch = self._decode_loop()
        was_training = self.model.training
        self.model.eval()
        started = time.perf_counter()
        session = contextlib.ExitStack()
        with self._lock:
            self._decoding = True
        try:
            session.enter_context(self._compute())
            while True:
                if self._loop_version != self.version:  # new weights: parked prefixes and cached casts are stale
                    batch.forget()
                    self._loop_version = self.version
                    session.close()
                    session.enter_context(self._compute())
                if self._stale:
                    batch.forget()
                    self._stale = False
                joining: list[_Request] = []
                with self._lock:
                    room = self.max_batch_size - len(batch) if self.continuous or not len(batch) else 0
                    while self._inbox and len(joining) < room:
                        joining.append(self._inbox.popleft())
                if not joining and not len(batch):
                    return
                try:
                    self._admit_and_step(batch, joining)
                except Exception as e:  # a failed step fails the requests in it, not the worker
                    failed = SamplerError(f"decoding failed: {type(e).__name__}: {e}")
                    failed.__cause__ = e
                    for request in joining + [row.key for row in batch.rows]:
                        request.loop.call_soon_threadsafe(_settle, request.future, None, failed)
                    self._loop = None
                    batch = self._decode_loop()
        finally:
            session.close()
            with self._lock:
                self._decoding = False
                batch.release()
            self.model.train(was_training)
            self.stats.busy_s += time.perf_counter() - started

    def _admit_and_step(self, batch: DecodeLoop, joining: list[_Request]) -> None:
        if joining:
            self.stats.prefills += 1
            requests = [(r, r.prompt_ids, r.params, r.seed) for r in joining]
            self._finish(batch.add(requests, [r.options for r in joining]))
        batch.drop({row.key for row in batch.rows if row.key.future.done()})  # cancelled callers
        if len(batch):
            self.stats.rows.append(len(batch))
            self.stats.batches += 1
            self._finish(batch.step())

    def _finish(self, done: list[tuple[_Request, RowResult]]) -> None:
        decode = self.tokenizer.decode
        for request, row in done:
            self.stats.tokens += len(row.token_ids)
            completion = Completion(
                token_ids=tuple(row.token_ids),
                logprobs=tuple(row.logprobs),
                entropies=tuple(row.entropies),
                # the end-of-turn token is markup, not content
                text=decode(
                    row.token_ids[:-1] if row.finish_reason == "stop" else row.token_ids, skip_special_tokens=False
                ),
                finish_reason=row.finish_reason,  # type: ignore[arg-type]
            )
            request.loop.call_soon_threadsafe(_settle, request.future, completion, None)


def _on_loop(loop: asyncio.AbstractEventLoop, listener: Callable[[TokenStep], None]) -> Callable[[TokenStep], None]:
    """`listener`, called from the decoding thread but run on `loop` (in order, before the completion settles)."""

    def call(step: TokenStep) -> None:
        try:
            loop.call_soon_threadsafe(listener, step)
        except RuntimeError:  # the caller's loop is closed: nobody listens any more
            pass

    return call


def _settle(future: asyncio.Future, result: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
