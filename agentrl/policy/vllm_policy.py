"""The GPU policy backend: vLLM's async engine in this process, fed token ids, with weights from the learner.

Every trajectory's `generate` is one request to the engine (`AsyncLLM` in vLLM's V1 engine, `AsyncLLMEngine`
before it), which batches all live requests continuously and reuses shared prefixes (a branch's prompt is its
parent's prefix). The prompt goes in as token ids (`TokensPrompt`), never as text, and the sampled ids come back
as they are, so the token-exact rule holds. A turn ends at any of the model's end-of-turn ids (the tokenizer's
EOS and every `eos_token_id` of its generation config). Sampler log-probabilities are those of the sampling
distribution (`logprobs_mode="processed_logprobs"`: after temperature and top-p, where the installed vLLM supports
it); the entropy is a top-k proxy from the returned top log-probabilities (what ARPO uses).

Weight updates: `sync_weights()` (after each learner update) and `refresh_weights()` (after `--resume`, before the
first collect) send the learner's parameters, a LoRA learner's merged module by module as they are written (no copy
of the model), to every worker through the worker extension of `agentrl/policy/vllm_worker.py`: safetensors files
that each worker reloads through vLLM's own in-place reload path, called by name through `collective_rpc`, never a
pickled function. The prefix cache, whose keys and values belong to the old weights, is dropped after each update.
Before the engine has started, or when called from inside the engine's running loop (a Ray rollout worker), an update
is only noted, and the engine loads it before it samples anything.

Failures of the engine are `SamplerError`s, so the trajectory that met one ends as an infrastructure failure: a
prompt longer than the engine's `max_model_len`, a request vLLM refuses or aborts, an engine that died (every later
request then fails at once, naming the first cause). Per-request seeds go to engines that honour them; vLLM's CPU
build cannot (its sampler's generators fail on a chunked prefill and take the engine down), so there requests are
sent unseeded and a turn is not reproducible on its own (`per_request_seeds`, said in the run header).

Memory: the engine's share of the GPU is computed beside the learner when `policy.vllm.gpu_memory_utilization` is
unset (`vllm_memory.py`). With `policy.vllm.sleep_between_steps` (a colocated engine), `release_memory()` puts the
engine to sleep (vLLM sleep mode, level 1: weights offloaded to CPU memory, KV cache dropped) before the learner's
update; the next `sync_weights`, `reclaim_memory` or `generate` wakes it. vLLM is an optional extra (`pip install
agentrl[vllm]`) and is imported only when this backend starts.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import re
from collections.abc import Callable, Coroutine, Iterable, Sequence
from typing import Any

from agentrl.errors import ConfigError, DependencyError, SamplerError
from agentrl.policy.config import VLLMConfig
from agentrl.policy.vllm_engine import cpu_build, engine_arguments, start_engine
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
    if output.finish_reason == "abort":  # vLLM dropped the request (shutdown, a pause): not the model's doing
        raise SamplerError("vLLM aborted the request before it finished")
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


def sampling_arguments(
    params: SamplingParams, eos_token_ids: Iterable[int], top_logprobs: int, *, seeds: bool
) -> dict[str, Any]:
    """vLLM's `SamplingParams` fields for one turn: the learner's distribution exactly (temperature and top-p; no
    top-k, min-p or penalties, whatever the model's generation config suggests), every end-of-turn id, and the
    sampled tokens' log-probabilities with the top `top_logprobs`."""
    return {
        "n": 1,
        "max_tokens": params.max_new_tokens,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "top_k": 0,
        "min_p": 0.0,
        "repetition_penalty": 1.0,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "seed": params.seed if seeds else None,
        "stop": list(params.stop) or None,
        "stop_token_ids": sorted(eos_token_ids),
        "include_stop_str_in_output": True,
        "logprobs": top_logprobs,
        "skip_special_tokens": False,
    }


def sampler_error(error: BaseException, prompt_tokens: int, max_model_len: int | None) -> SamplerError:
    """What a failed request tells the run, in one line: the prompt too long for the engine, a request vLLM refused,
    or the engine itself gone."""
    text = " ".join(str(error).split())
    if type(error).__name__ == "EngineDeadError":
        return SamplerError(f"the vLLM engine died ({text or 'see its log above'}); resume the run once it is fixed")
    too_long = re.search(r"longer than the maximum model length of (\d+)", text)
    if too_long or (max_model_len is not None and prompt_tokens >= max_model_len):
        limit = too_long.group(1) if too_long else max_model_len
        return SamplerError(
            f"the prompt has {prompt_tokens} tokens and the vLLM engine serves at most {limit} "
            "(policy.vllm.max_model_len; rollout.max_tokens_per_episode bounds what an episode grows to)"
        )
    if isinstance(error, ValueError | TypeError):
        return SamplerError(f"vLLM refused the request: {text}")
    return SamplerError(f"vLLM failed the request: {type(error).__name__}: {text}")


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
        if source_model is not None:  # the learner is loaded: size the engine beside it now, a misfit is one line
            from agentrl.policy.vllm_memory import fit_engine_memory

            self.engine_kwargs = fit_engine_memory(
                self.engine_kwargs,
                self.settings.gpu_memory_utilization,
                source_model,
                self.settings.sleep_between_steps,
            )
        self.eos_token_ids = frozenset(eos_token_ids) or model_eos_ids(model_path, tokenizer)
        self._engine_factory = engine_factory
        self._engine: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None
        self._ids = itertools.count()
        self._stale = False  # the learner holds weights the engine has not loaded
        self._asleep = False
        self._weight_dtype: Any = None
        self._dead: str | None = None  # why the engine cannot sample any more (it died, or never started)
        self.per_request_seeds = not cpu_build()
        """Whether `SamplingParams.seed` reaches the engine (not on vLLM's CPU build)."""

    @classmethod
    def from_config(
        cls,
        config: Any,
        tokenizer: Any,
        *,
        source_model: Any | None = None,
        eos_token_ids: Iterable[int] = (),
        dtype: str = "auto",
    ) -> VLLMPolicy:
        """The engine a `PolicyConfig` describes (`config.vllm` holds the engine settings); `eos_token_ids`, when
        given, replaces the end-of-turn ids read off the model's generation config."""
        from agentrl.policy.loading import resolve_model_path

        path = resolve_model_path(config.model)
        return cls(
            path, tokenizer, source_model=source_model, settings=config.vllm, eos_token_ids=eos_token_ids, dtype=dtype
        )

    # --- the engine ------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the engine in the running event loop (if it has not started), awake and with the learner's latest
        weights; `generate` does this on first use."""
        await self._ready()

    async def _ready(self) -> Any:
        if self._dead is not None:
            raise SamplerError(self._dead)
        if self._engine is None:
            self._loop, self._lock = asyncio.get_running_loop(), asyncio.Lock()
            self._engine = self._start()
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

    def _start(self) -> Any:
        try:
            return self._engine_factory(self.engine_kwargs)
        except (ConfigError, DependencyError):
            raise
        except Exception as e:  # every trajectory would try again, for a minute each: fail them all at once
            self._dead = f"the vLLM engine did not start: {type(e).__name__}: {' '.join(str(e).split())[:500]}"
            raise SamplerError(self._dead) from e

    def _run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        assert self._loop is not None
        return self._loop.run_until_complete(coroutine)

    async def generate(self, prompt_ids: Sequence[int], params: SamplingParams) -> Completion:
        """Sample one turn; whatever goes wrong in vLLM raises `SamplerError` (an infrastructure failure)."""
        import vllm
        from vllm.inputs import TokensPrompt

        engine = await self._ready()
        final = None
        request_id = f"agentrl-{next(self._ids)}"
        arguments = sampling_arguments(params, self.eos_token_ids, self.top_logprobs, seeds=self.per_request_seeds)
        try:
            async for output in engine.generate(
                TokensPrompt(prompt_token_ids=list(prompt_ids)), vllm.SamplingParams(**arguments), request_id
            ):
                final = output
        except Exception as e:
            limit = getattr(getattr(engine, "model_config", None), "max_model_len", None)
            error = sampler_error(e, len(prompt_ids), limit)
            if type(e).__name__ == "EngineDeadError":
                self._dead = str(error)
            raise error from e
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
        from agentrl.policy.vllm_worker import ENGINE_INFO, LOAD_WEIGHTS, WeightFiles

        try:
            if self._weight_dtype is None:
                import torch

                info = (await self._engine.collective_rpc(ENGINE_INFO))[0]
                if info.get("quantization"):
                    raise ConfigError(
                        f"the vLLM engine serves {info['quantization']}-quantized weights, which the learner's "
                        "full-precision updates cannot replace: train from the unquantized checkpoint"
                    )
                self._weight_dtype = getattr(torch, info["dtype"])
            with WeightFiles(BUCKET_BYTES) as files:
                for bucket in _buckets(named_tensors):
                    with files.bucket(bucket, self._weight_dtype) as path:
                        await self._engine.collective_rpc(LOAD_WEIGHTS, args=(path,))
        except (ConfigError, SamplerError):
            raise
        except Exception as e:
            raise SamplerError(f"the weight update to the vLLM engine failed: {type(e).__name__}: {e}") from e
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
        if self._engine is None:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # between the trainer's phases: load them now
            self._run(self._ready())
        # else: called from a coroutine on the engine's loop (a Ray rollout worker's actor method), which cannot
        # block on its own loop: the next `generate` (or an awaited `start()`) loads them before sampling

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
    """Buckets of about `BUCKET_BYTES`, closed only between layers: vLLM reloads a layer from the tensors one file
    gives it, so a layer split over two files would lose half of its update."""
    bucket, size, layer = [], 0, None
    for name, tensor in named_tensors:
        if size >= BUCKET_BYTES and _layer(name) != layer:
            yield bucket
            bucket, size = [], 0
        bucket.append((name, tensor))
        size += tensor.numel() * tensor.element_size()
        layer = _layer(name)
    if bucket:
        yield bucket


def _layer(name: str) -> str:
    """`model.layers.3.self_attn.q_proj.weight` → `model.layers.3`; a name outside numbered layers → its module."""
    numbered = re.match(r"^(.*?\.\d+)\.", name)
    return numbered.group(1) if numbered else name.rpartition(".")[0]


def _merged_parameters(model: Any) -> Iterable[tuple[str, Any]]:
    """The learner's weights under the base model's names, a LoRA model's merged one module at a time."""
    from agentrl.policy.learner_weights import merged_named_weights

    return merged_named_weights(model)
