"""The GPU policy backend: vLLM's async engine in this process, fed token ids, with weights from the learner.

Every trajectory's `generate` is one request to the engine (`AsyncLLM` in vLLM's V1 engine, `AsyncLLMEngine`
before it), which batches all live requests continuously and reuses shared prefixes (a branch's prompt is its
parent's prefix). The prompt goes in as token ids (`TokensPrompt`), never as text, and the sampled ids come back
as they are, so the token-exact rule holds. A turn ends at any of the model's end-of-turn ids (the tokenizer's
EOS and every `eos_token_id` of its generation config). Sampler log-probabilities are those of the sampling
distribution (`logprobs_mode="processed_logprobs"`: after temperature and top-p, where the installed vLLM supports
it); the entropy is a top-k proxy from the returned top log-probabilities (what ARPO uses).

Weight updates: `sync_weights()` (after each learner update) and `refresh_weights()` (after `--resume`, before the
first collect) send the learner's parameters, a LoRA learner's merged, to every worker through the worker
extension of `agentrl/policy/vllm_worker.py`: safetensors files that each worker loads by name through
`collective_rpc`, never a pickled function. The prefix cache, whose keys and values belong to the old weights, is
dropped after each update. Before the engine has started, an update is only noted, and the engine loads it before
it samples anything.

Memory (`policy.vllm.sleep_between_steps`, a colocated engine): `release_memory()` puts the engine to sleep (vLLM
sleep mode, level 1: weights offloaded to CPU memory, KV cache dropped) before the learner's update; the next
`sync_weights`, `reclaim_memory` or `generate` wakes it. vLLM is an optional extra (`pip install agentrl[vllm]`)
and is imported only when this backend starts.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections.abc import Callable, Coroutine, Iterable, Sequence
from typing import Any

from agentrl.errors import DependencyError, SamplerError
from agentrl.policy.config import VLLMConfig
from agentrl.protocols import SamplingParams
from agentrl.types import Completion

BUCKET_BYTES = 512 << 20


def topk_entropy(logprobs: Iterable[float]) -> float:
    """−Σ p log p over the returned top-k tokens: a lower bound of the entropy, and ARPO's proxy for it."""
    return -sum(math.exp(lp) * lp for lp in logprobs if lp > -math.inf)


def completion_from_output(output: Any, eos_token_ids: Iterable[int], decode: Any) -> Completion:
    """A `Completion` from a finished vLLM `CompletionOutput` (token ids, per-position logprob dicts)."""
    ids = list(output.token_ids)
    logprobs, entropies = [], []
    for position, token in enumerate(ids):
        table = output.logprobs[position] if output.logprobs is not None else None
        if table is None or token not in table:
            logprobs.append(0.0)
            entropies.append(0.0)
            continue
        logprobs.append(float(table[token].logprob))
        entropies.append(topk_entropy(float(entry.logprob) for entry in table.values()))
    if output.finish_reason == "length":
        finish = "length"
    elif ids and ids[-1] in eos_token_ids:
        finish = "stop"
    else:
        finish = "tool_call"  # a stop string ended the turn (it is kept in the output)
    text = decode(ids[:-1] if finish == "stop" else ids, skip_special_tokens=False)
    return Completion(tuple(ids), tuple(logprobs), tuple(entropies), text, finish)  # type: ignore[arg-type]


def model_eos_ids(model_path: str, tokenizer: Any) -> frozenset[int]:
    """Every id that ends a turn: the tokenizer's EOS and each `eos_token_id` of the model's generation config,
    which may be a list (Qwen: `<|im_end|>`, `<|endoftext|>`; Llama 3: `<|eot_id|>`, `<|end_of_text|>`)."""
    from transformers import GenerationConfig

    ids = set()
    if tokenizer.eos_token is not None:
        ids.add(tokenizer.convert_tokens_to_ids(tokenizer.eos_token))
    try:
        configured = GenerationConfig.from_pretrained(model_path, local_files_only=True).eos_token_id
    except OSError:  # no generation_config.json: the tokenizer's EOS alone
        configured = None
    if configured is not None:
        ids.update([configured] if isinstance(configured, int) else configured)
    return frozenset(ids)


def engine_arguments(
    model_path: str, settings: VLLMConfig, *, dtype: str = "auto", extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """vLLM's engine arguments (`AsyncEngineArgs` fields) for a `policy.vllm` section."""
    from agentrl.policy.vllm_worker import EXTENSION

    kwargs: dict[str, Any] = {
        "model": model_path,
        "dtype": dtype,
        "gpu_memory_utilization": settings.gpu_memory_utilization,
        "tensor_parallel_size": settings.tensor_parallel_size,
        "enforce_eager": settings.enforce_eager,
        "enable_prefix_caching": True,
    }
    if settings.max_model_len is not None:
        kwargs["max_model_len"] = settings.max_model_len
    if settings.sleep_between_steps:
        kwargs["enable_sleep_mode"] = True
    return {**kwargs, **(extra or {}), "worker_extension_cls": EXTENSION}  # weight updates need the extension


def start_engine(engine_kwargs: dict[str, Any]) -> Any:
    """vLLM's async engine built from `engine_kwargs`."""
    import dataclasses

    from vllm import AsyncEngineArgs

    try:
        from vllm.v1.engine.async_llm import AsyncLLM as Engine
    except ImportError:  # vLLM before the V1 engine
        from vllm import AsyncLLMEngine as Engine
    fields = {f.name for f in dataclasses.fields(AsyncEngineArgs)}
    if "worker_extension_cls" not in fields:
        raise DependencyError("policy.backend=vllm needs vLLM >= 0.8.2 (worker extensions): pip install -U vllm")
    if "logprobs_mode" in fields:  # without it (older vLLM) logprobs are the raw distribution's: exact at T=1, top_p=1
        engine_kwargs = {"logprobs_mode": "processed_logprobs", **engine_kwargs}
    return Engine.from_engine_args(AsyncEngineArgs(**engine_kwargs))


class VLLMPolicy:
    """A `Policy` over an in-process vLLM async engine; `source_model` is the learner's model to copy from.

    The engine starts on the first `generate` (or `start`), in the running event loop, which every later call
    must share: the synchronous methods (`sync_weights`, `refresh_weights`, `release_memory`, `reclaim_memory`)
    run on that loop and are called between the trainer's phases, while it is not running."""

    def __init__(
        self,
        model_path: str,
        tokenizer: Any,
        *,
        source_model: Any | None = None,
        settings: VLLMConfig | None = None,
        top_logprobs: int = 10,
        dtype: str = "auto",
        engine_kwargs: dict[str, Any] | None = None,
        eos_token_ids: Iterable[int] = (),
        engine_factory: Callable[[dict[str, Any]], Any] = start_engine,
    ):
        self.model_path, self.tokenizer, self.source_model = model_path, tokenizer, source_model
        self.settings = settings or VLLMConfig()
        self.version = 0
        self.top_logprobs = top_logprobs
        self.engine_kwargs = engine_arguments(model_path, self.settings, dtype=dtype, extra=engine_kwargs)
        self.eos_token_ids = frozenset(eos_token_ids) or model_eos_ids(model_path, tokenizer)
        self._engine_factory = engine_factory
        self._engine: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None
        self._ids = itertools.count()
        self._stale = False  # the learner holds weights the engine has not loaded
        self._asleep = False
        self._weight_dtype: Any = None

    @classmethod
    def from_config(
        cls, config: Any, tokenizer: Any, *, source_model: Any | None = None, eos_token_ids: Iterable[int] = ()
    ) -> VLLMPolicy:
        """The engine a `PolicyConfig` describes (`config.vllm` holds the engine settings); `eos_token_ids`, when
        given, replaces the end-of-turn ids read off the model's generation config."""
        from agentrl.policy.loading import resolve_model_path

        path = resolve_model_path(config.model)
        return cls(path, tokenizer, source_model=source_model, settings=config.vllm, eos_token_ids=eos_token_ids)

    # --- the engine ------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the engine in the running event loop (if it has not started), awake and with the learner's latest
        weights; `generate` does this on first use."""
        await self._ready()

    async def _ready(self) -> Any:
        if self._engine is None:
            self._loop, self._lock = asyncio.get_running_loop(), asyncio.Lock()
            self._engine = self._engine_factory(self.engine_kwargs)
        if self._asleep or self._stale:
            assert self._lock is not None
            async with self._lock:  # the first caller wakes the engine and loads the weights; the others wait
                if self._asleep:
                    await self._engine.wake_up()
                    self._asleep = False
                    await self._reset_prefix_cache()  # the KV cache's contents did not survive the sleep
                if self._stale:
                    await self._push(_merged_parameters(self.source_model))
                    self._stale = False
        return self._engine

    def _run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        assert self._loop is not None
        return self._loop.run_until_complete(coroutine)

    def _sampling_params(self, params: SamplingParams) -> Any:
        import vllm

        return vllm.SamplingParams(
            n=1,
            max_tokens=params.max_new_tokens,
            temperature=params.temperature,
            top_p=params.top_p,
            seed=params.seed,
            stop=list(params.stop) or None,
            stop_token_ids=sorted(self.eos_token_ids),
            include_stop_str_in_output=True,
            logprobs=self.top_logprobs,
            skip_special_tokens=False,
        )

    async def generate(self, prompt_ids: Sequence[int], params: SamplingParams) -> Completion:
        from vllm.inputs import TokensPrompt

        engine = await self._ready()
        final = None
        request_id = f"agentrl-{next(self._ids)}"
        async for output in engine.generate(
            TokensPrompt(prompt_token_ids=list(prompt_ids)), self._sampling_params(params), request_id
        ):
            final = output
        if final is None or not final.outputs:
            raise SamplerError(f"vLLM returned nothing for request {request_id}")
        return completion_from_output(final.outputs[0], self.eos_token_ids, self.tokenizer.decode)

    # --- weights from the learner ----------------------------------------------------------------------

    async def update_weights(self, named_tensors: Iterable[tuple[str, Any]]) -> None:
        """Load `(name, tensor)` pairs (Hugging Face parameter names, full tensors) into every worker."""
        await self._ready()
        assert self._lock is not None
        async with self._lock:
            await self._push(named_tensors)

    async def _push(self, named_tensors: Iterable[tuple[str, Any]]) -> None:
        from agentrl.policy.vllm_worker import LOAD_WEIGHTS, MODEL_DTYPE, WeightFiles

        if self._weight_dtype is None:
            import torch

            self._weight_dtype = getattr(torch, (await self._engine.collective_rpc(MODEL_DTYPE))[0])
        with WeightFiles(BUCKET_BYTES) as files:
            for bucket in _buckets(named_tensors):
                with files.bucket(bucket, self._weight_dtype) as path:
                    await self._engine.collective_rpc(LOAD_WEIGHTS, args=(path,))
        await self._reset_prefix_cache()

    async def _reset_prefix_cache(self) -> None:
        # vLLM before V1 returns None; V1 returns False when requests still hold cache blocks (none should: weights
        # change only between steps), and a cache left in place would serve keys and values of the old weights
        if await self._engine.reset_prefix_cache() is False:
            raise SamplerError("vLLM could not reset its prefix cache after a weight update (requests still running)")

    def sync_weights(self) -> None:
        """Send the learner's weights after an update (now, or before the engine first samples) and count it."""
        self.refresh_weights()
        self.version += 1

    def refresh_weights(self) -> None:
        """Send the learner's current weights without counting an update: after `--resume` has loaded a checkpoint
        into the learner, before the first collect. Called between phases (the loop not running)."""
        if self.source_model is None:
            return
        self._stale = True
        if self._engine is not None:
            self._run(self._ready())

    # --- GPU memory between steps (sleep mode) ---------------------------------------------------------

    def release_memory(self) -> None:
        """With `sleep_between_steps`: put the engine to sleep (level 1: weights offloaded to CPU memory, KV cache
        dropped) so the learner's update has the GPU. Call it once the step's rollouts are collected and scored,
        with no request in flight. A no-op without sleep mode, before the engine has started or when asleep."""
        if self._engine is None or self._asleep or not self.settings.sleep_between_steps:
            return
        self._run(self._engine.sleep(level=1))
        self._asleep = True

    def reclaim_memory(self) -> None:
        """Wake the engine (and load any weights it has missed) before the next collect; a no-op when awake.
        `sync_weights` and `generate` wake it too."""
        if self._engine is not None and self._asleep:
            self._run(self._ready())

    async def aclose(self) -> None:
        if self._engine is not None:
            self._engine.shutdown()
            self._engine = None


def _buckets(named_tensors: Iterable[tuple[str, Any]]) -> Iterable[list[tuple[str, Any]]]:
    bucket, size = [], 0
    for name, tensor in named_tensors:
        bucket.append((name, tensor))
        size += tensor.numel() * tensor.element_size()
        if size >= BUCKET_BYTES:
            yield bucket
            bucket, size = [], 0
    if bucket:
        yield bucket


def _merged_parameters(model: Any) -> Iterable[tuple[str, Any]]:
    """The learner's parameters under the base model's names; a LoRA model is merged into a copy first."""
    if hasattr(model, "merge_and_unload"):  # peft: vLLM loads plain weights, so send W + BA
        import copy

        model = copy.deepcopy(model).merge_and_unload()
    return model.state_dict().items()
