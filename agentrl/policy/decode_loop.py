"""Continuous batched sampling with a Hugging Face causal LM, returning what RL needs.

`DecodeLoop` is one KV-cached decoding loop whose rows come and go between steps. Each row owns a slot of a
`SlotCache`: a joining prompt is prefilled into a free slot (joiners of one call share the forward pass), its first
token is sampled from that prefill, and at every step each row's pending token is fed and the next sampled. A row
that finishes leaves at once: the last row moves into its slot, nobody else's cache is copied.

Prompts reuse what is already computed. A finished row's keys and values are parked in a `PrefixCache` under its
token ids, so the next turn of a multi-turn episode (its prompt extends the last one) prefills only the new
tokens; prompts of one call that share a prefix (a group's identical prompts, the system prompt of every task)
have it prefilled once.

Sampling runs on the device for the whole batch (`device_sampler.sample_step`): every row draws from counter-based
randomness keyed by its own seed and step, so its tokens do not depend on which other requests happened to share
its steps, and a step reads its results back in one transfer (`HostTransfer`), whatever the number of rows.

A row may carry `RowOptions`: a listener that sees each token as it is sampled (streaming), how many of the most
likely alternatives to report with it (computed only when some row asks), and a rule that forbids tokens given
what the row wrote so far (forbidden ids get probability 0 before temperature and top-p, so the log-probs describe
the distribution actually sampled from). `sample_batch` runs a fixed set of prompts through one loop.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from agentrl.errors import ConfigError
from agentrl.policy.device_sampler import StepPlan, row_keys, sample_step
from agentrl.policy.host_transfer import HostTransfer
from agentrl.policy.prefix_cache import BLOCK, PrefixCache
from agentrl.policy.row_tensors import KEYS, STEP, TEMPERATURE, TOP_P, RowTensors
from agentrl.policy.slot_cache import SlotCache
from agentrl.policy.slot_masks import SlotMasks
from agentrl.protocols import SamplingParams

GREEDY_BELOW = 1e-6
"""Temperatures at or below this sample the argmax (and report the distribution at this temperature)."""


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


@dataclass(eq=False)
class _Row:
    key: Any
    params: SamplingParams
    prompt: list[int]
    result: RowResult
    options: RowOptions = field(default=PLAIN)
    position: int = 0
    """Positions whose keys and values are in the row's slot (the pending token goes at this one)."""


def _cache_keyword(model: torch.nn.Module) -> str:
    """The keyword the model's forward takes its KV cache under: transformers renamed `past_key_values` to
    `cache` (5.24 warns on the old name and drops it later). A PEFT wrapper forwards keywords to its base model."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "cache" if "cache" in inspect.signature(type(base).forward).parameters else "past_key_values"


class DecodeLoop:
    """The live rows of one KV-cached decoding loop; rows join (prefill) and leave between steps.

    Row i of `rows` lives in slot i of `cache`; its per-row device state is row i of `state`.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        *,
        eos_token_ids: set[int],
        pad_token_id: int,
        stop_hit: Callable[[Any, SamplingParams, list[int]], bool] | None = None,
        prefix_cache_tokens: int = 0,
    ):
        self.model = model
        self.eos_token_ids, self.pad_token_id, self.stop_hit = eos_token_ids, pad_token_id, stop_hit
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        if base.config.vocab_size >= 2**24:  # ids travel to the host as float32
            raise ConfigError(f"the in-process sampler takes vocabularies below 2^24 ids, not {base.config.vocab_size}")
        self.device = next(model.parameters()).device
        self.rows: list[_Row] = []
        self.cache = SlotCache(base.config.num_hidden_layers, self.device)
        self.state = RowTensors(self.device)
        self.masks = SlotMasks(base.config, base.get_input_embeddings().weight.dtype)
        self.prefix = PrefixCache(prefix_cache_tokens)
        self.transfer = HostTransfer(self.device)
        self.forwards = 0
        self._inference: bool | None = None
        self._cache_keyword = _cache_keyword(model)
        # a prefill needs the last position's logits only; every prompt position's is most of its cost
        takes = "logits_to_keep" in inspect.signature(type(base).forward).parameters
        self._last_logits = {"logits_to_keep": 1} if takes else {}

    def __len__(self) -> int:
        return len(self.rows)

    def add(
        self,
        requests: Sequence[tuple[Any, Sequence[int], SamplingParams, int]],
        options: Sequence[RowOptions] | None = None,
    ) -> list[tuple[Any, RowResult]]:
        """Prefill `(key, prompt_ids, params, seed)` requests (with `options`, one per request), sample their first
        token and let them join. Returns the rows that finished on that first token."""
        if not requests:
            return []
        with self._grad_mode():
            return self._add(requests, options if options is not None else [PLAIN] * len(requests))

    def step(self) -> list[tuple[Any, RowResult]]:
        """Feed every row its pending token and sample the next; returns the rows that finished."""
        if not self.rows:
            return []
        with self._grad_mode():
            rows = len(self.rows)
            width = max(row.position for row in self.rows) + 1
            ints = self.state.ints[:rows]
            logits = self._forward(ints[:, 0:1], ints[:, 1:2], 0, width)
            return self._sample(0, logits)

    def drop(self, keys: set[Any]) -> None:
        """Remove rows whose caller no longer waits for them (cancelled requests)."""
        with self._grad_mode():
            self._remove([i for i, row in enumerate(self.rows) if row.key in keys], park=False)

    def forget(self) -> None:
        """The weights changed: parked keys and values describe the old ones."""
        self.prefix.clear()

    def release(self) -> None:
        """Free the slots' memory (only while no row is live); parked prefixes stay."""
        if not self.rows:
            self.cache.release()

    def _grad_mode(self) -> Any:
        """`inference_mode`, the cheapest to dispatch, unless autocast is on: its cache of cast weights holds only
        outside inference mode (inside, every forward pass casts every weight again). Chosen at the first call, so
        the loop's tensors are all of one kind."""
        if self._inference is None:
            self._inference = not torch.is_autocast_enabled(self.device.type)
        return torch.inference_mode() if self._inference else torch.no_grad()

    def _add(self, requests, options) -> list[tuple[Any, RowResult]]:
        prompts = [list(prompt) for _, prompt, _, _ in requests]
        if not all(prompts):
            raise ValueError("a prompt needs at least one token")
        self._prefill_shared(prompts)
        first = len(self.rows)
        reused = self._load_prefixes(first, prompts)
        ints, floats = [], []
        for (key, prompt, params, seed), option in zip(requests, options, strict=True):
            self.rows.append(_Row(key, params, list(prompt), RowResult([], [], [], "length"), option, len(prompt) - 1))
            ints.append([0, len(prompt) - 1, 0, *row_keys(int(seed))])
            # top-p of 1 or more keeps every id (2.0: above any rounding of the cumulative mass); of 0, the argmax
            floats.append([max(params.temperature, GREEDY_BELOW), max(params.top_p, 1e-9) if params.top_p < 1 else 2.0])
        self.state.write(first, ints, floats)
        logits = self._prefill(first, [p[n:] for p, n in zip(prompts, reused, strict=True)], reused)
        return self._sample(first, logits)

    # --- prefill --------------------------------------------------------------------------------------------

    def _prefill_shared(self, prompts: list[list[int]]) -> None:
        """Prefill once, and park, what several joiners' prompts share: first the common prefix of prompts that
        begin alike (a system prompt), then each prompt that several joiners send (a group)."""
        if not self.prefix.budget_tokens or len(prompts) < 2:
            return
        alike: dict[tuple[int, ...], list[list[int]]] = {}
        for p in prompts:
            if len(p) > BLOCK:
                alike.setdefault(tuple(p[:BLOCK]), []).append(p)
        same: dict[tuple[int, ...], int] = {}
        for p in prompts:
            same[tuple(p)] = same.get(tuple(p), 0) + 1
        for wanted in (
            [p[: _common_prefix_length(group)] for group in alike.values() if len(group) > 1],
            [list(p[:-1]) for p, count in same.items() if count > 1],
        ):
            self._park_prefixes([p for p in wanted if len(p) >= BLOCK and self.prefix.match(p)[1] < len(p)])

    def _park_prefixes(self, prefixes: list[list[int]]) -> None:
        """Prefill `prefixes` in spare slots (no token sampled) and park their keys and values."""
        if not prefixes:
            return
        first = len(self.rows)
        self.state.reserve(first + len(prefixes))
        reused = self._load_prefixes(first, [p + [0] for p in prefixes])
        self._prefill(first, [p[n:] for p, n in zip(prefixes, reused, strict=True)], reused)
        for i, p in enumerate(prefixes):
            self.prefix.park(p, self.cache.export(first + i, len(p)))

    def _load_prefixes(self, first: int, prompts: list[list[int]]) -> list[int]:
        """Copy each prompt's longest parked prefix into its slot (first + i); the positions each got."""
        found = [self.prefix.lookup(p) if self.prefix.budget_tokens else (None, 0) for p in prompts]
        longest = max(len(p) for p in prompts)
        self.cache.reserve(first + len(prompts), longest)
        self.state.reserve(first + len(prompts), longest)
        for i, (entry, n) in enumerate(found):
            if entry is not None:
                self.cache.load(first + i, entry.kv, n)
        return [n for _, n in found]

    def _prefill(self, first: int, suffixes: list[list[int]], starts: list[int]) -> torch.Tensor:
        """Feed each suffix at positions starts[i]... of slot first + i, in one forward pass; the logits after
        each suffix's last token. Shorter suffixes are left-padded; the padding is written past the row's end,
        where no query of the row looks."""
        longest = max(len(s) for s in suffixes)
        ids, positions = [], []
        for suffix, start in zip(suffixes, starts, strict=True):
            pad = longest - len(suffix)
            ids.append([self.pad_token_id] * pad + suffix)
            end = start + len(suffix)
            positions.append(list(range(end, end + pad)) + list(range(start, end)))
        both = torch.tensor([ids, positions], dtype=torch.long).to(self.device, non_blocking=True)
        width = max(starts) + longest
        return self._forward(both[0], both[1], first, width)

    def _forward(self, ids_N_T: torch.Tensor, positions_N_T: torch.Tensor, first: int, width: int) -> torch.Tensor:
        rows = ids_N_T.shape[0]
        self.state.reserve(first + rows, width)
        width = self.cache.begin(first, positions_N_T, width, self.state.arange[first : first + rows, None, None])
        self.state.reserve(first + rows, width)
        out = self.model(
            input_ids=ids_N_T,
            attention_mask=self.masks.build(positions_N_T, self.state.arange[:width]),
            position_ids=positions_N_T,
            use_cache=True,
            **{self._cache_keyword: self.cache},
            **self._last_logits,
        )
        self.forwards += 1
        return out.logits[:, -1, :]

    # --- sampling and finishing -------------------------------------------------------------------------------

    def _sample(self, first: int, logits_N_V: torch.Tensor) -> list[tuple[Any, RowResult]]:
        rows = self.rows[first:]
        n = len(rows)
        greedy = sum(row.params.temperature <= GREEDY_BELOW for row in rows)
        plan = StepPlan(
            greedy="none" if greedy == 0 else "all" if greedy == n else "some",
            top_p=any(row.params.top_p < 1 for row in rows),
            top_k=max(row.options.top_logprobs for row in rows),
        )
        ints, floats = self.state.ints[first : first + n], self.state.floats[first : first + n]
        tokens_N, packed_N_K = sample_step(
            logits_N_V, floats[:, TEMPERATURE], floats[:, TOP_P], ints[:, KEYS], ints[:, STEP], plan,
            self._banned(rows, logits_N_V.shape[-1]),
        )  # fmt: skip
        self.state.advance(first, n, tokens_N)
        finished, done = [], []
        for i, (row, values) in enumerate(zip(rows, self.transfer.read(packed_N_K), strict=True)):
            finish = self._record(row, values, plan.top_k)
            if finish is not None:
                row.result.finish_reason = finish
                finished.append(first + i)
                done.append((row.key, row.result))
        self._remove(finished, park=True)
        return done

    def _record(self, row: _Row, values: list[float], k: int) -> str | None:
        """Append a sampled token to its row, tell the row's listener; the finish reason if the row is done."""
        res, token = row.result, int(values[0])
        res.token_ids.append(token)
        res.logprobs.append(values[1])
        res.entropies.append(values[2])
        row.position += 1
        finish = None
        if token in self.eos_token_ids:
            finish = "stop"
        elif self.stop_hit is not None and self.stop_hit(row.key, row.params, res.token_ids):
            finish = "tool_call"
        elif len(res.token_ids) >= row.params.max_new_tokens:
            finish = "length"
        if row.options.on_token is not None:
            asked = row.options.top_logprobs
            top = tuple(zip((int(i) for i in values[3 + k : 3 + k + asked]), values[3 : 3 + asked], strict=True))
            row.options.on_token(TokenStep(token, values[1], top, finish))
        return finish

    def _banned(self, rows: list[_Row], vocab: int) -> torch.Tensor | None:
        """Each row's forbidden ids as a mask (None when no row forbids anything)."""
        if all(row.options.forbid is None for row in rows):
            return None
        pairs: list[tuple[int, int]] = []
        for r, row in enumerate(rows):
            if row.options.forbid is not None:
                pairs += [(r, i) for i in row.options.forbid(row.result.token_ids) if 0 <= i < vocab]
        mask = torch.zeros((len(rows), vocab), dtype=torch.bool, device=self.device)
        if pairs:
            index = torch.tensor(pairs, dtype=torch.long).to(self.device, non_blocking=True)
            mask[index[:, 0], index[:, 1]] = True
        return mask

    def _remove(self, leaving: list[int], *, park: bool) -> None:
        """Rows leave: park their keys and values (if `park`), then fill their slots with the last rows."""
        if not leaving:
            return
        if park and self.prefix.budget_tokens:
            for i in leaving:
                row = self.rows[i]
                ids = (row.prompt + row.result.token_ids)[: row.position]
                if len(ids) >= BLOCK:
                    self.prefix.park(ids, self.cache.export(i, row.position))
        gone = set(leaving)
        kept = len(self.rows) - len(gone)
        holes = sorted(i for i in gone if i < kept)
        movers = [i for i in range(kept, len(self.rows)) if i not in gone]
        if holes:
            self.cache.move(movers, holes, max(self.rows[i].position for i in movers))
            self.state.move(movers, holes)
            for source, target in zip(movers, holes, strict=True):
                self.rows[target] = self.rows[source]
        del self.rows[kept:]


def _common_prefix_length(seqs: Sequence[Sequence[int]]) -> int:
    """Length of the longest prefix all `seqs` share, at most the shortest one's length less one."""
    low, high = min(seqs), max(seqs)  # lexicographic: whatever all share, these two share
    limit = min(len(s) for s in seqs) - 1
    n = 0
    while n < limit and low[n] == high[n]:
        n += 1
    return n


def sample_batch(
    model: torch.nn.Module,
    prompts: Sequence[Sequence[int]],
    params: Sequence[SamplingParams],
    *,
    eos_token_ids: set[int],
    pad_token_id: int,
    stop_hit: Callable[[int, list[int]], bool] | None = None,
    seeds: Sequence[int] | None = None,
    prefix_cache_tokens: int = 0,
) -> list[RowResult]:
    """Sample a continuation for every prompt. `stop_hit(row, ids)` reports a stop string at the end of ids."""
    hit = None if stop_hit is None else (lambda key, _params, ids: stop_hit(key, ids))
    batch = DecodeLoop(
        model, eos_token_ids=eos_token_ids, pad_token_id=pad_token_id, stop_hit=hit,
        prefix_cache_tokens=prefix_cache_tokens,
    )  # fmt: skip
    if seeds is None:
        seeds = [int(torch.randint(0, 2**62, (1,))) for _ in prompts]
    results: dict[int, RowResult] = dict(batch.add([(r, p, params[r], int(seeds[r])) for r, p in enumerate(prompts)]))
    while len(batch):
        results.update(batch.step())
    return [results[r] for r in range(len(prompts))]
