"""The GPU policy backend: vLLM's async engine in this process, fed token ids, with weights from the learner.

Every trajectory's `generate` is one request to the engine (`AsyncLLM` in vLLM's V1 engine, `AsyncLLMEngine`
before it), which batches all live requests continuously and reuses shared prefixes (a branch's prompt is its
parent's prefix). The prompt goes in as token ids (`TokensPrompt`), never as text, and the sampled ids come back
as they are, so the token-exact rule holds. Sampler log-probabilities are those of the sampling distribution
(`logprobs_mode="processed_logprobs"`: after temperature and top-p, where the installed vLLM supports it); the
entropy is a top-k proxy from the returned top log-probabilities (what ARPO uses).

Weight updates: `sync_weights()` copies the learner's parameters into the engine's workers through
`collective_rpc`, in buckets, as CUDA IPC handles when the learner's tensors are on a GPU (no copy through
the host) and as CPU tensors otherwise, then drops the prefix cache, whose keys and values belong to the old
weights. vLLM is an optional extra (`pip install agentrl[vllm]`) and is imported only when this backend starts.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections.abc import Iterable, Sequence
from typing import Any

from agentrl.protocols import SamplingParams
from agentrl.types import Completion

BUCKET_BYTES = 512 << 20


def topk_entropy(logprobs: Iterable[float]) -> float:
    """−Σ p log p over the returned top-k tokens: a lower bound of the entropy, and ARPO's proxy for it."""
    return -sum(math.exp(lp) * lp for lp in logprobs if lp > -math.inf)


def completion_from_output(output: Any, eos_token_ids: set[int], decode: Any) -> Completion:
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


def _load_weights_on_worker(worker: Any, bucket: list[tuple[str, Any]]) -> None:
    """Runs inside each vLLM worker: rebuild the bucket's tensors (from IPC handles) and load them."""
    device = worker.device
    weights = []
    for name, packed in bucket:
        if isinstance(packed, tuple):  # (rebuild function, its arguments) from torch's CUDA IPC reduction
            rebuild, args = packed
            args = list(args)
            args[6] = device.index  # the receiving device, in torch's rebuild_cuda_tensor argument order
            tensor = rebuild(*args)
        else:
            tensor = packed.to(device)
        weights.append((name, tensor))
    worker.model_runner.model.load_weights(weights=weights)


class VLLMPolicy:
    """A `Policy` over an in-process vLLM async engine; `source_model` is the learner's model to copy from."""

    def __init__(
        self,
        model_path: str,
        tokenizer: Any,
        *,
        source_model: Any | None = None,
        top_logprobs: int = 10,
        gpu_memory_utilization: float = 0.5,
        dtype: str = "auto",
        max_model_len: int | None = None,
        engine_kwargs: dict[str, Any] | None = None,
    ):
        self.model_path, self.tokenizer, self.source_model = model_path, tokenizer, source_model
        self.version = 0
        self.top_logprobs = top_logprobs
        self._engine_kwargs = {
            "model": model_path,
            "dtype": dtype,
            "gpu_memory_utilization": gpu_memory_utilization,
            "enable_prefix_caching": True,
            **({"max_model_len": max_model_len} if max_model_len else {}),
            **(engine_kwargs or {}),
        }
        self._engine: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ids = itertools.count()
        self._eos = {tokenizer.convert_tokens_to_ids(tokenizer.eos_token)}

    @classmethod
    def from_config(cls, config: Any, tokenizer: Any, *, source_model: Any | None = None) -> VLLMPolicy:
        """The engine a `PolicyConfig` describes (`config.vllm` holds the engine settings)."""
        from agentrl.policy.loading import resolve_model_path

        engine = config.vllm
        return cls(
            resolve_model_path(config.model),
            tokenizer,
            source_model=source_model,
            gpu_memory_utilization=engine.gpu_memory_utilization,
            max_model_len=engine.max_model_len,
        )

    # --- the engine ------------------------------------------------------------------------------------

    def _start(self) -> Any:
        from vllm import AsyncEngineArgs

        try:
            from vllm.v1.engine.async_llm import AsyncLLM as Engine
        except ImportError:  # vLLM before the V1 engine
            from vllm import AsyncLLMEngine as Engine
        kwargs = dict(self._engine_kwargs)
        try:
            args = AsyncEngineArgs(**{"logprobs_mode": "processed_logprobs", **kwargs})
        except TypeError:  # older vLLM: logprobs of the raw distribution (exact at temperature 1, top_p 1)
            args = AsyncEngineArgs(**kwargs)
        return Engine.from_engine_args(args)

    def _sampling_params(self, params: SamplingParams) -> Any:
        import vllm

        return vllm.SamplingParams(
            n=1,
            max_tokens=params.max_new_tokens,
            temperature=params.temperature,
            top_p=params.top_p,
            seed=params.seed,
            stop=list(params.stop) or None,
            include_stop_str_in_output=True,
            logprobs=self.top_logprobs,
            skip_special_tokens=False,
        )

    async def generate(self, prompt_ids: Sequence[int], params: SamplingParams) -> Completion:
        from vllm.inputs import TokensPrompt

        if self._engine is None:
            self._engine, self._loop = self._start(), asyncio.get_running_loop()
        final = None
        request_id = f"agentrl-{next(self._ids)}"
        async for output in self._engine.generate(
            TokensPrompt(prompt_token_ids=list(prompt_ids)), self._sampling_params(params), request_id
        ):
            final = output
        if final is None or not final.outputs:
            raise RuntimeError(f"vLLM returned nothing for request {request_id}")
        return completion_from_output(final.outputs[0], self._eos, self.tokenizer.decode)

    # --- weights from the learner ----------------------------------------------------------------------

    async def update_weights(self, named_tensors: Iterable[tuple[str, Any]]) -> None:
        """Load `(name, tensor)` pairs (Hugging Face parameter names) into every worker, bucket by bucket."""
        if self._engine is None:
            self._engine, self._loop = self._start(), asyncio.get_running_loop()
        for bucket in _buckets(named_tensors):
            await self._engine.collective_rpc(_load_weights_on_worker, args=([_pack(n, t) for n, t in bucket],))
        await self._engine.reset_prefix_cache()

    def sync_weights(self) -> None:
        """Copy the learner's weights into the engine (called between steps, when no rollout is running)."""
        if self.source_model is not None and self._engine is not None:
            assert self._loop is not None
            params = ((n, p.detach()) for n, p in _merged_parameters(self.source_model))
            self._loop.run_until_complete(self.update_weights(params))
        self.version += 1

    async def aclose(self) -> None:
        if self._engine is not None:
            self._engine.shutdown()
            self._engine = None


def _pack(name: str, tensor: Any) -> tuple[str, Any]:
    if tensor.is_cuda:
        from torch.multiprocessing.reductions import reduce_tensor

        return name, reduce_tensor(tensor.contiguous())
    return name, tensor.contiguous()


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
