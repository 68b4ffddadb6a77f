"""A policy backend over any OpenAI-compatible *completions* endpoint that accepts token ids (vLLM, SGLang,
`agentrl serve`).

Training needs token ids and sampler log-probabilities, which chat endpoints do not return faithfully. This
backend sends the prompt as a list of token ids to `/v1/completions` and asks for logprobs with tokens reported
as ids (`return_tokens_as_token_ids`, a vLLM extension also honoured by `agentrl serve`). Servers that ignore
the extension make it fall back to re-tokenizing the returned text, which breaks the token-exact rule, so that
fallback is counted in `retokenized_completions` and should be zero in a healthy setup. The entropy is a
top-k proxy from the returned top logprobs.

Sampling is asked for explicitly: temperature and top-p as the rollout sets them, and top-k off, min-p 0 and no
repetition, presence or frequency penalty, since a server fills what a request leaves out from the model's
generation config (Qwen's suggests top-k 20 and a repetition penalty) and the learner scores the plain tempered
distribution. The request's `model` is the name the server serves the model under: `policy.served_model_name`, or
what `GET /v1/models` lists (its only model, else `policy.model` when listed). A vLLM server whose config says it
runs vLLM's CPU build gets no per-request seed (that build's sampler dies on one), and one that returns raw
log-probabilities instead of the sampling distribution's is refused for training (`vllm_reload_client.py`).

Weights: built for training (`from_config` with the learner's `source_model`), the policy checks that the server can
take the learner's weights and pushes them once, so the server starts from exactly the learner's weights;
`sync_weights()` pushes them after every step and `refresh_weights()` pushes them without counting a step (after
`--resume`). How, and what happens when the server cannot take weights: `weight_sync.py`.

Several servers (`base_url` a sequence, or comma-separated): a `ServerPool` (`server_pool.py`) picks the server of each
request (a trajectory's requests stick to one server, new trajectories go to the least-loaded), every server gets each
weight update, and `server_stats` counts what the pool did (`rollout/server_*`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

from agentrl.errors import ConfigError
from agentrl.policy.server_pool import Server, ServerPool, server_urls
from agentrl.protocols import SamplingParams
from agentrl.types import Completion


class OpenAICompletionsPolicy:
    """A `Policy` that samples from a remote OpenAI-compatible completions endpoint."""

    def __init__(
        self,
        tokenizer: Any,
        *,
        base_url: str | Sequence[str],
        model: str,
        api_key: str | None = None,
        top_logprobs: int = 5,
        timeout_s: float = 120.0,
        max_retries: int = 3,
        source_model: Any | None = None,
        weight_sync: Any | None = None,
        send_seeds: bool = True,
    ):
        from openai import AsyncOpenAI

        self.tokenizer = tokenizer
        self.version = 0
        self.source_model = source_model
        # pushes source_model's weights to the server (weight_sync.py); None: the server's weights stay as they are
        # (evaluation, or training with policy.off_policy=true)
        self.weight_sync = weight_sync
        self.model = model
        self.send_seeds = send_seeds
        self.top_logprobs = top_logprobs
        self.retokenized_completions = 0
        key = api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
        self.pool = ServerPool(
            server_urls(base_url),
            lambda url: AsyncOpenAI(base_url=url, api_key=key, timeout=timeout_s, max_retries=max_retries),
            name=model,
        )
        self.server_stats = self.pool.stats
        self._eos_text = tokenizer.eos_token

    @classmethod
    def from_config(cls, config: Any, tokenizer: Any, *, source_model: Any | None = None) -> OpenAICompletionsPolicy:
        """The client a `PolicyConfig` describes (`backend=openai`), training `source_model`: checks that every server
        takes weights (a `ConfigError` saying what to do when one cannot, unless `policy.off_policy=true`) and pushes
        the learner's weights once."""
        from agentrl.policy.vllm_reload_client import check_sampling_server, server_info, serves_on_cpu
        from agentrl.policy.weight_sync import connect_weight_sync, server_root

        root = server_root(config.base_urls[0])
        info = server_info(root)  # a vLLM server in dev mode says how it samples
        if info is not None and source_model is not None:
            check_sampling_server(root, info)
        sync = connect_weight_sync(config, source_model)
        policy = cls(
            tokenizer,
            base_url=config.base_url,
            model=served_model_name(config),
            api_key=config.api_key,
            source_model=source_model,
            weight_sync=sync,
            send_seeds=not serves_on_cpu(info),
        )
        policy.refresh_weights()
        return policy

    async def generate(self, prompt_ids: Sequence[int], params: SamplingParams) -> Completion:
        """Sample one turn on the server the pool picks; a failure of the endpoint raises `SamplerError`."""
        return await self.pool.call(prompt_ids, lambda server: self._sample(server, prompt_ids, params))

    async def _sample(self, server: Server, prompt_ids: Sequence[int], params: SamplingParams) -> Completion:
        response = await self._complete(server.client, prompt_ids, params)
        self.pool.check_version(server, getattr(response, "system_fingerprint", None))
        choice = response.choices[0]
        ids, logprobs, entropies = self._tokens(choice)
        ended_by_eos = bool(ids) and ids[-1] in self.eos_token_ids
        if choice.finish_reason == "length":
            finish = "length"
        elif ended_by_eos or not params.stop:
            finish = "stop"
        else:
            finish = "tool_call"
        eos_text = self.tokenizer.convert_ids_to_tokens(ids[-1]) if ended_by_eos else ""
        text = choice.text.removesuffix(eos_text) if ended_by_eos else choice.text
        return Completion(tuple(ids), tuple(logprobs), tuple(entropies), text, finish)  # type: ignore[arg-type]

    async def _complete(self, client: Any, prompt_ids: Sequence[int], params: SamplingParams) -> Any:
        return await client.completions.create(
            model=self.model,
            prompt=list(prompt_ids),
            max_tokens=params.max_new_tokens,
            temperature=params.temperature,
            top_p=params.top_p,
            stop=list(params.stop) or None,
            seed=params.seed if self.send_seeds else None,
            presence_penalty=0.0,
            frequency_penalty=0.0,
            logprobs=self.top_logprobs,
            extra_body={
                "top_k": -1,
                "min_p": 0.0,
                "repetition_penalty": 1.0,
                "return_tokens_as_token_ids": True,
                "skip_special_tokens": False,
                "include_stop_str_in_output": True,
            },
        )

    @property
    def eos_token_ids(self) -> frozenset[int]:
        """Every id that ends a turn: the chat settings' (the generation config's), else the tokenizer's."""
        settings = getattr(self, "chat_settings", None)
        return frozenset(
            settings.eos_token_ids if settings and settings.eos_token_ids else [self.tokenizer.eos_token_id]
        )

    def sync_weights(self) -> None:
        """After a learner step: push the learner's weights to every server, then count the new version (a server
        failing the update raises an `InfraError` naming it)."""
        self.refresh_weights()
        self.version += 1

    def refresh_weights(self) -> None:
        """Push the learner's current weights without counting a step (after a resumed run loaded its checkpoint)."""
        if self.weight_sync is not None and self.source_model is not None:
            from agentrl.policy.learner_weights import learner_weights, merged_named_weights

            whole = getattr(self.weight_sync, "whole_model", False)
            model = self.source_model
            self.weight_sync.push(dict(merged_named_weights(model)) if whole else learner_weights(model))
            self.pool.expect_versions(self.weight_sync.server_versions)

    async def aclose(self) -> None:
        if self.weight_sync is not None:
            self.weight_sync.close()
        await self.pool.aclose()

    def _tokens(self, choice: Any) -> tuple[list[int], list[float], list[float]]:
        lp = choice.logprobs
        tokens = list(lp.tokens or []) if lp is not None else []
        if tokens and all(t.startswith("token_id:") for t in tokens):
            ids = [int(t.split(":", 1)[1]) for t in tokens]
            logprobs = [float(x) if x is not None else 0.0 for x in lp.token_logprobs]
            entropies = [_topk_entropy(top) for top in (lp.top_logprobs or [None] * len(ids))]
            return ids, logprobs, entropies
        self.retokenized_completions += 1
        ids = list(self.tokenizer(choice.text, add_special_tokens=False)["input_ids"])
        if choice.finish_reason == "stop" and not choice.text.endswith(self._eos_text):
            ids.append(self.tokenizer.eos_token_id)
        return ids, [0.0] * len(ids), [0.0] * len(ids)


def served_model_name(config: Any) -> str:
    """The `model` of each request: `policy.served_model_name`, else what the first server lists at `GET /models`
    (its only model, or `policy.model` among several); `policy.model` when it lists nothing."""
    import httpx

    if config.served_model_name:
        return config.served_model_name
    url = config.base_urls[0]
    key = config.api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
    try:
        response = httpx.get(f"{url}/models", headers={"Authorization": f"Bearer {key}"}, timeout=10.0)
        listed = [m["id"] for m in response.json()["data"]] if response.status_code == 200 else []
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        listed = []
    if len(set(listed)) == 1:
        return listed[0]
    if not listed or config.model in listed:
        return config.model
    raise ConfigError(
        f"the server at {url} serves {', '.join(listed)}, not policy.model={config.model}: set "
        "policy.served_model_name to the one to sample from"
    )


def _topk_entropy(top: dict[str, float] | None) -> float:
    """Entropy of the renormalised top-k distribution: a lower bound proxy for the full entropy."""
    if not top:
        return 0.0
    probs = [math.exp(v) for v in top.values()]
    total = sum(probs)
    return -sum(p / total * math.log(p / total) for p in probs if p > 0)
