"""Information-gain turn rewards (IGPO, Wang et al. 2025, arXiv 2510.14967).

Each tool turn is rewarded by how much the observation it produced moved the policy towards the ground-truth
answer. With v(h) the policy's geometric-mean probability of the answer's tokens teacher-forced after history h,

    prob_diff:      IG_t = v(h_{t+1}) − v(h_t)
    log_prob_diff:  IG_t = log v(h_{t+1}) − log v(h_t)

where h_t is the token history before turn t (the prompt, earlier turns and their observations) and h_{t+1}
adds turn t and its observation. One probe per history, all of a trajectory's probes in one batched prefill
(`ContinuationScorer.score_continuations`), batched again across concurrently scored trajectories by the policy.
The values go into the turn reward slot (`Turn.reward`), where IGPO's turn-level advantages read them.

Every turn followed by an observation gets a gain: a tool round, and a malformed call answered with its parse
error (the error is information too, and skipping it would break the sum). So gains of consecutive turns
telescope: Σ_t IG_t = v(h_last) − v(h_0) under `prob_diff` (log v under `log_prob_diff`), h_last the history
before the answer turn. The answer turn (no observation after it) gets none: the outcome reward scores it; a turn
cut by the turn or token limit has no observation either, and abstains.

The probe's tokens are the lead and the answer as the tokenizer writes them *after the history*: the history's
tail (its ids after the last special token: the generation prompt) is decoded, tail + lead + answer encoded as
one text, and the answer's positions are those past tail + lead. So the lead/answer boundary and any merge with
the tail are those of one text, not of three separate encodings. When the joint encoding does not begin with the
tail's own ids (a token would straddle the end of the history, which the sampled ids fix), lead + answer are
encoded together on their own and `ProbeStats.separate_encodings` counts it.

Deviations from the official code: the probe is the answer as the policy would write it right after the
history (after `lead`, empty by default because the history already ends with the assistant generation
prompt), not IGPO's `<think>…</think><answer>…</answer>` string, which is specific to its prompt format;
set `lead` to reproduce it.

Only a policy that scores continuations (`score_continuations`: the transformers backend) can be probed. With any
other (vLLM, an OpenAI-compatible endpoint) or none, the reward abstains on every turn, warns once and counts the
trajectories in `ProbeStats.unscorable` (logged per step as `reward_cost/<name>/unscorable`), so a run that asked
for information gain cannot lose it silently.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agentrl.reward import Reward
from agentrl.types import Task, Trajectory

Mode = Literal["prob_diff", "log_prob_diff"]

MAX_TAIL_TOKENS = 32
"""The most history ids re-tokenised with the answer; the generation prompt after the last special token is a few."""


def history_prefixes(trajectory: Trajectory) -> list[list[int]]:
    """h_0 … h_T: the token history before each turn, and after the last one (T + 1 prefixes)."""
    prefixes = [list(trajectory.prompt_ids)]
    for turn in trajectory.turns:
        prefixes.append(prefixes[-1] + list(turn.completion_ids) + list(turn.observation_ids))
    return prefixes


def gained_turns(trajectory: Trajectory) -> list[int]:
    """Indices of the turns that get an information gain: every turn followed by an observation (tool results,
    or the parse error of a malformed call), so that consecutive gains telescope."""
    return [k for k, t in enumerate(trajectory.turns) if t.observation_ids]


def mean_logprobs(logprobs: Sequence[Sequence[float]], starts: Sequence[int]) -> list[float]:
    """Mean log-probability of each probe's answer span, `row[start:]` (the log of IGPO's geometric-mean
    probability)."""
    return [sum(row[start:]) / len(row[start:]) for row, start in zip(logprobs, starts, strict=True)]


def information_gains(mean_logp_H: Sequence[float], mode: Mode) -> list[float]:
    """IG between consecutive probe values: `mean_logp_H[i + 1]` vs `mean_logp_H[i]`.

    >>> [round(x, 2) for x in information_gains([math.log(0.1), math.log(0.3), math.log(0.7)], "prob_diff")]
    [0.2, 0.4]
    """
    if mode == "prob_diff":
        values = [math.exp(x) for x in mean_logp_H]
    elif mode == "log_prob_diff":
        values = list(mean_logp_H)
    else:
        raise ValueError(f"info gain mode must be prob_diff or log_prob_diff, not {mode!r}")
    return [b - a for a, b in zip(values[:-1], values[1:], strict=True)]


def history_tail(tokenizer: Any, context_ids: Sequence[int]) -> tuple[int, ...]:
    """The context's ids after its last special token (at most `MAX_TAIL_TOKENS`): the text a probe continues."""
    special = set(getattr(tokenizer, "all_special_ids", None) or ())
    start = max(0, len(context_ids) - MAX_TAIL_TOKENS)
    for i in range(len(context_ids) - 1, start - 1, -1):
        if context_ids[i] in special:
            return tuple(context_ids[i + 1 :])
    return tuple(context_ids[start:])


def probe_continuation(tokenizer: Any, tail_ids: Sequence[int], lead: str, answer: str) -> tuple[list[int], int, bool]:
    """(continuation ids, index of the answer's first token among them, whether tokenised jointly with the tail).

    The continuation is `lead + answer` as one text written after the tail: the joint encoding of tail + lead +
    answer past the tail's own ids; the answer starts at the first token not wholly inside tail + lead. When the
    joint encoding does not begin with `tail_ids` (or the tokenizer cannot decode), lead + answer are encoded on
    their own (still as one text).
    """

    def encode(text: str) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=False))

    decode = getattr(tokenizer, "decode", None)
    tail = decode(list(tail_ids)) if tail_ids and decode is not None else ""
    joint = encode(tail + lead + answer)
    together = joint[: len(tail_ids)] == list(tail_ids) and (decode is not None or not tail_ids)
    if not together:
        tail, joint = "", encode(lead + answer)
    offset = len(tail_ids) if together else 0
    head = encode(tail + lead) if tail + lead else []
    shared = next((i for i, (a, b) in enumerate(zip(head, joint, strict=False)) if a != b), min(len(head), len(joint)))
    return joint[offset:], max(shared - offset, 0), together


@dataclass
class ProbeStats:
    """What the probe cost and what it could not do; the trainer logs the per-step increase of each counter as
    `reward_cost/<name>/<counter>`."""

    probes: int = 0
    """Teacher-forced rows (histories) scored; the policy batches them into its own forward passes."""
    unscorable: int = 0
    """Trajectories left without gains because the policy cannot score continuations (vLLM, a remote endpoint)."""
    separate_encodings: int = 0
    """Probe rows whose answer could not be tokenised together with the history's tail (see the module doc)."""


class InfoGain:
    """The IGPO turn reward; `mode` is `prob_diff` (the paper's) or `log_prob_diff` (the newer official script).

    Abstains when the task has no ground-truth answer, and when the policy cannot score continuations (a vLLM
    or remote OpenAI-compatible backend): then it warns once and counts `stats.unscorable`.
    """

    def __init__(self, mode: Mode = "prob_diff", *, lead: str = "", name: str | None = None):
        information_gains([0.0, 0.0], mode)  # validates the mode now rather than mid-run
        self.mode = mode
        self.lead = lead
        self.name = name or ("info_gain" if mode == "prob_diff" else "info_gain_log")
        self.stats = ProbeStats()
        self._warned = False

    @property
    def probes(self) -> int:
        """Probe rows scored so far (one teacher-forced prefill row per history)."""
        return self.stats.probes

    def as_reward(self) -> Reward:
        return Reward(fn=self.turn_values, name=self.name, level="turns", inputs=("task", "trajectory", "policy"))

    async def turn_values(self, task: Task, trajectory: Trajectory, policy: Any) -> list[float | None] | None:
        turns = gained_turns(trajectory)
        if task.answer is None or not turns:
            return None
        if not hasattr(policy, "score_continuations"):
            self._unscorable(policy)
            return None
        # probe h_t and h_{t+1} for every gained turn t; shared histories are probed once
        needed = sorted({k for t in turns for k in (t, t + 1)})
        prefixes = history_prefixes(trajectory)
        by_tail: dict[tuple[int, ...], tuple[list[int], int, bool]] = {}
        rows = []
        for k in needed:
            tail = history_tail(policy.tokenizer, prefixes[k])
            if tail not in by_tail:
                by_tail[tail] = probe_continuation(policy.tokenizer, tail, self.lead, task.answer)
            rows.append(by_tail[tail])
        if any(start >= len(ids) for ids, start, _ in rows):  # an answer that encodes to no tokens
            return None
        logprobs = await policy.score_continuations([prefixes[k] for k in needed], [ids for ids, _, _ in rows])
        self.stats.probes += len(needed)
        self.stats.separate_encodings += sum(not together for _, _, together in rows)
        value = dict(zip(needed, mean_logprobs(logprobs, [start for _, start, _ in rows]), strict=True))
        out: list[float | None] = [None] * len(trajectory.turns)
        for t in turns:
            out[t] = information_gains([value[t], value[t + 1]], self.mode)[0]
        return out

    def _unscorable(self, policy: Any) -> None:
        self.stats.unscorable += 1
        if not self._warned:
            self._warned = True
            why = (
                "no policy was given to probe"
                if policy is None
                else f"the policy ({type(policy).__name__}) cannot score continuations (only the transformers "
                "backend can)"
            )
            warnings.warn(
                f"{self.name}: {why}, so information gain abstains on every turn; counted as "
                f"reward_cost/{self.name}/unscorable",
                RuntimeWarning,
                stacklevel=2,
            )


info_gain = InfoGain("prob_diff")
info_gain_log = InfoGain("log_prob_diff")
