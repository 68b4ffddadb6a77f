"""Continuous batched sampling with a Hugging Face causal LM, returning what RL needs.

`DecodeLoop` is one KV-cached decoding loop whose rows come and go between steps: a joining prompt is
prefilled on its own (left padding among the joiners), its first token is sampled from that prefill, and its
cache is merged into the running batch; a row that finishes leaves the batch and the cache at once, and cache
columns that no live row attends to any more are trimmed. So a request never waits for a batch to drain, and a
long tail costs only its own rows. Every row samples from its own seeded generator, so a trajectory's draws do
not depend on which other requests happened to share its steps. `sample_batch` runs a fixed set of prompts
through one such loop.

A row may carry `RowOptions`: a listener that sees each token as it is sampled (streaming), how many of the most
likely alternatives to report with it (computed only for rows that ask), and a rule that forbids tokens given what
the row wrote so far (forbidden ids get probability 0 before temperature and top-p, so the log-probs describe the
distribution actually sampled from). Rows without options sample exactly as before.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from agentrl.protocols import SamplingParams


@dataclass
class RowResult:
    token_ids: list[int]
    logprobs: list[float]
    entropies: list[float]
    finish_reason: str  # "stop" | "tool_call" | "length"


@dataclass(frozen=True)
class TokenStep:
    """One sampled token as a listener sees it."""

    token_id: int
    logprob: float
    """Log-probability under the sampling distribution (after temperature, top-p and forbidden ids)."""
    top: tuple[tuple[int, float], ...] = ()
    """The `RowOptions.top_logprobs` most likely ids of that distribution with their log-probs, most likely first."""
    finish_reason: str | None = None
    """Set on the row's last token: `stop` (an end-of-turn id), `tool_call` (a stop string) or `length`."""


@dataclass(frozen=True)
class RowOptions:
    """What a row asks of the loop beyond sampling."""

    top_logprobs: int = 0
    on_token: Callable[[TokenStep], None] | None = None
    """Called in the decoding thread with every sampled token, before the row's result is handed back."""
    forbid: Callable[[list[int]], Collection[int]] | None = None
    """Ids the next token may not be, given the ids this row sampled so far."""


PLAIN = RowOptions()


@dataclass
class _Row:
    key: Any
    params: SamplingParams
    generator: torch.Generator
    result: RowResult
    options: RowOptions = field(default=PLAIN)


def _filter_top_p(logprobs_R_V: torch.Tensor, top_p_R: torch.Tensor) -> torch.Tensor:
    """Mask out tokens outside each row's nucleus (the smallest set with mass ≥ top_p)."""
    sorted_lp, order = logprobs_R_V.sort(dim=-1, descending=True)
    cumulative = sorted_lp.exp().cumsum(-1)
    drop_sorted = (cumulative - sorted_lp.exp()) >= top_p_R[:, None]
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return logprobs_R_V.masked_fill(drop, float("-inf")).log_softmax(-1)


def _choose(
    logits_R_V: torch.Tensor,
    params: Sequence[SamplingParams],
    generators: Sequence[torch.Generator],
    forbidden: Sequence[Collection[int]] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Sample one token per row; return (tokens_R, sampler logprobs_R, entropies_R, sampler logprobs_R_V)."""
    logits_R_V = logits_R_V.float()
    if forbidden is not None:
        logits_R_V = logits_R_V.clone()  # `.float()` of float logits is the model's own tensor
        for r, ids in enumerate(forbidden):
            if ids:
                logits_R_V[r, torch.tensor(sorted(ids), dtype=torch.long, device=logits_R_V.device)] = float("-inf")
    temps = torch.tensor([max(p.temperature, 1e-6) for p in params], device=logits_R_V.device)
    logprobs_R_V = (logits_R_V / temps[:, None]).log_softmax(-1)
    top_p = torch.tensor([p.top_p for p in params], device=logits_R_V.device)
    if bool((top_p < 1.0).any()):
        logprobs_R_V = _filter_top_p(logprobs_R_V, top_p)
    probs_R_V = logprobs_R_V.exp()
    entropies_R = -(probs_R_V * logprobs_R_V.nan_to_num(neginf=0.0)).sum(-1)
    tokens = []
    for r, (p, g) in enumerate(zip(params, generators, strict=False)):
        if p.temperature <= 0:
            tokens.append(int(logprobs_R_V[r].argmax()))
        else:
            tokens.append(int(torch.multinomial(probs_R_V[r].cpu(), 1, generator=g)))
    tokens_R = torch.tensor(tokens, device=logits_R_V.device)
    return tokens_R, logprobs_R_V.gather(-1, tokens_R[:, None])[:, 0], entropies_R, logprobs_R_V


def _top(logprobs_R_V: torch.Tensor, ks: Sequence[int]) -> list[tuple[tuple[int, float], ...]]:
    """Each row's `ks[r]` most likely ids with their log-probs (nothing is computed when no row asks)."""
    k = min(max(ks, default=0), logprobs_R_V.shape[-1])
    if k <= 0:
        return [()] * len(ks)
    values, ids = (t.tolist() for t in logprobs_R_V.topk(k, dim=-1))
    return [tuple(zip(ids[r][: ks[r]], values[r][: ks[r]], strict=True)) for r in range(len(ks))]


def _layers(cache: Any) -> list[Any]:
    """The per-layer key/value holders of a DynamicCache (transformers ≥ 4.56 keeps them in `layers`)."""
    return list(cache.layers)


def _cache_keyword(model: torch.nn.Module) -> str:
    """The keyword the model's forward takes its KV cache under: transformers renamed `past_key_values` to
    `cache` (5.24 warns on the old name and drops it later). A PEFT wrapper forwards keywords to its base model."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "cache" if "cache" in inspect.signature(type(base).forward).parameters else "past_key_values"


def _left_pad(x: torch.Tensor, columns: int, dim: int) -> torch.Tensor:
    if columns == 0:
        return x
    shape = list(x.shape)
    shape[dim] = columns
    return torch.cat([x.new_zeros(shape), x], dim=dim)


class DecodeLoop:
    """The live rows of one KV-cached decoding loop; rows join (prefill) and leave between steps.

    Between steps the state is: a cache of C columns, an attention mask of C + 1 columns (the last one is each
    row's pending token, sampled but not yet fed), and the pending tokens.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        *,
        eos_token_ids: set[int],
        pad_token_id: int,
        stop_hit: Callable[[Any, SamplingParams, list[int]], bool] | None = None,
    ):
        self.model = model
        self.eos_token_ids, self.pad_token_id, self.stop_hit = eos_token_ids, pad_token_id, stop_hit
        self.device = next(model.parameters()).device
        self.rows: list[_Row] = []
        self.cache: Any = None
        self.attention: torch.Tensor | None = None
        self.pending: torch.Tensor | None = None
        self.forwards = 0
        self._cache_keyword = _cache_keyword(model)
        # a prefill needs the last position's logits only; every prompt position's is most of its cost
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        takes = "logits_to_keep" in inspect.signature(type(base).forward).parameters
        self._last_logits = {"logits_to_keep": 1} if takes else {}

    def __len__(self) -> int:
        return len(self.rows)

    @torch.inference_mode()
    def add(
        self,
        requests: Sequence[tuple[Any, Sequence[int], SamplingParams, int]],
        options: Sequence[RowOptions] | None = None,
    ) -> list[tuple[Any, RowResult]]:
        """Prefill `(key, prompt_ids, params, seed)` requests (with `options`, one per request), sample their first
        token and merge them in. Returns the rows that finished on that first token."""
        from transformers import DynamicCache

        if not requests:
            return []
        options = options if options is not None else [PLAIN] * len(requests)
        n, longest = len(requests), max(len(prompt) for _, prompt, _, _ in requests)
        ids = torch.full((n, longest), self.pad_token_id, dtype=torch.long)
        attention = torch.zeros((n, longest), dtype=torch.long)
        rows = []
        for r, (key, prompt, params, seed) in enumerate(requests):
            ids[r, longest - len(prompt) :] = torch.tensor(list(prompt), dtype=torch.long)
            attention[r, longest - len(prompt) :] = 1
            generator = torch.Generator(device="cpu")
            generator.manual_seed(int(seed))
            rows.append(_Row(key, params, generator, RowResult([], [], [], "length"), options[r]))
        cache = DynamicCache()
        logits = self._forward(ids.to(self.device), attention.to(self.device), cache)
        done, keep = self._sample(rows, logits)
        attention = torch.cat([attention.to(self.device), attention.new_ones((n, 1), device=self.device)], dim=1)
        tokens = torch.tensor([row.result.token_ids[-1] for row in rows], device=self.device)
        self._select(cache, keep)
        self._merge([rows[i] for i in keep], cache, attention[keep], tokens[keep])
        return done

    @torch.inference_mode()
    def step(self) -> list[tuple[Any, RowResult]]:
        """Feed every row its pending token and sample the next; returns the rows that finished."""
        if not self.rows:
            return []
        assert self.attention is not None and self.pending is not None
        logits = self._forward(self.pending[:, None], self.attention, self.cache)
        done, keep = self._sample(self.rows, logits)
        if not keep:
            self.rows, self.cache, self.attention, self.pending = [], None, None, None
            return done
        tokens = torch.tensor([row.result.token_ids[-1] for row in self.rows], device=self.device)
        attention = torch.cat([self.attention, self.attention.new_ones((len(self.rows), 1))], dim=1)
        if len(keep) < len(self.rows):
            self._select(self.cache, keep)
            self.rows = [self.rows[i] for i in keep]
            attention, tokens = attention[keep], tokens[keep]
        self.attention, self.pending = attention, tokens
        self._trim()
        return done

    def drop(self, keys: set[Any]) -> None:
        """Remove rows whose caller no longer waits for them (cancelled requests)."""
        keep = [i for i, row in enumerate(self.rows) if row.key not in keys]
        if len(keep) == len(self.rows):
            return
        self._select(self.cache, keep)
        self.rows = [self.rows[i] for i in keep]
        if self.rows:
            assert self.attention is not None and self.pending is not None
            self.attention, self.pending = self.attention[keep], self.pending[keep]
            self._trim()
        else:
            self.cache = self.attention = self.pending = None

    # --- internals -------------------------------------------------------------------------------------

    def _forward(self, input_ids: torch.Tensor, attention: torch.Tensor, cache: Any) -> torch.Tensor:
        positions = (attention.cumsum(-1) - 1).clamp(min=0)[:, -input_ids.shape[1] :]
        out = self.model(
            input_ids=input_ids,
            attention_mask=attention,
            position_ids=positions,
            use_cache=True,
            **{self._cache_keyword: cache},
            **self._last_logits,
        )
        self.forwards += 1
        return out.logits[:, -1, :]

    def _sample(self, rows: list[_Row], logits_R_V: torch.Tensor) -> tuple[list[tuple[Any, RowResult]], list[int]]:
        forbidden = None
        if any(row.options.forbid is not None for row in rows):
            forbidden = [() if row.options.forbid is None else row.options.forbid(row.result.token_ids) for row in rows]
        tokens, logprobs, entropies, dist_R_V = _choose(
            logits_R_V, [r.params for r in rows], [r.generator for r in rows], forbidden
        )
        top = _top(dist_R_V, [row.options.top_logprobs for row in rows])
        done, keep = [], []
        for b, row in enumerate(rows):
            res, tok = row.result, int(tokens[b])
            res.token_ids.append(tok)
            res.logprobs.append(float(logprobs[b]))
            res.entropies.append(float(entropies[b]))
            finish = None
            if tok in self.eos_token_ids:
                finish = "stop"
            elif self.stop_hit is not None and self.stop_hit(row.key, row.params, res.token_ids):
                finish = "tool_call"
            elif len(res.token_ids) >= row.params.max_new_tokens:
                finish = "length"
            if row.options.on_token is not None:
                row.options.on_token(TokenStep(tok, res.logprobs[-1], top[b], finish))
            if finish is None:
                keep.append(b)
                continue
            res.finish_reason = finish
            done.append((row.key, res))
        return done, keep

    def _select(self, cache: Any, keep: list[int]) -> None:
        index = torch.tensor(keep, dtype=torch.long, device=self.device)
        for layer in _layers(cache):
            layer.keys, layer.values = layer.keys[index], layer.values[index]

    def _merge(self, rows: list[_Row], cache: Any, attention: torch.Tensor, tokens: torch.Tensor) -> None:
        if not rows:
            return
        if not self.rows:
            self.rows, self.cache, self.attention, self.pending = rows, cache, attention, tokens
            return
        assert self.attention is not None and self.pending is not None
        old, new = self.attention.shape[1], attention.shape[1]
        width = max(old, new)
        for mine, theirs in zip(_layers(self.cache), _layers(cache), strict=True):
            mine.keys = torch.cat([_left_pad(mine.keys, width - old, 2), _left_pad(theirs.keys, width - new, 2)])
            mine.values = torch.cat([_left_pad(mine.values, width - old, 2), _left_pad(theirs.values, width - new, 2)])
        self.attention = torch.cat([_left_pad(self.attention, width - old, 1), _left_pad(attention, width - new, 1)])
        self.pending = torch.cat([self.pending, tokens])
        self.rows = self.rows + rows

    def _trim(self) -> None:
        """Drop leading cache columns that every live row masks out (left by rows that left)."""
        assert self.attention is not None
        cut = int(self.attention.argmax(dim=1).min())
        if cut > 0:
            self.attention = self.attention[:, cut:]
            for layer in _layers(self.cache):
                layer.keys, layer.values = layer.keys[:, :, cut:], layer.values[:, :, cut:]


def sample_batch(
    model: torch.nn.Module,
    prompts: Sequence[Sequence[int]],
    params: Sequence[SamplingParams],
    *,
    eos_token_ids: set[int],
    pad_token_id: int,
    stop_hit: Callable[[int, list[int]], bool] | None = None,
    seeds: Sequence[int] | None = None,
) -> list[RowResult]:
    """Sample a continuation for every prompt. `stop_hit(row, ids)` reports a stop string at the end of ids."""
    hit = None if stop_hit is None else (lambda key, _params, ids: stop_hit(key, ids))
    batch = DecodeLoop(model, eos_token_ids=eos_token_ids, pad_token_id=pad_token_id, stop_hit=hit)
    if seeds is None:
        seeds = [int(torch.randint(0, 2**62, (1,))) for _ in prompts]
    results: dict[int, RowResult] = dict(batch.add([(r, p, params[r], int(seeds[r])) for r, p in enumerate(prompts)]))
    while len(batch):
        results.update(batch.step())
    return [results[r] for r in range(len(prompts))]
