"""Information-gain turn rewards (IGPO, Wang et al. 2025, arXiv 2510.14967).

Each tool turn is rewarded by how much the observation it produced moved the policy towards the ground-truth
answer. With v(h) the policy's geometric-mean probability of the answer's tokens teacher-forced after history h,

    prob_diff:      IG_t = v(h_{t+1}) − v(h_t)
    log_prob_diff:  IG_t = log v(h_{t+1}) − log v(h_t)

where h_t is the token history before turn t (the prompt, earlier turns and their observations) and h_{t+1}
adds turn t and its observation. One probe per history, all of a trajectory's probes in one batched prefill
(`ContinuationScorer.score_continuations`), batched again across concurrently scored trajectories by the policy.
The values go into the turn reward slot (`Turn.reward`), where IGPO's turn-level advantages read them.

Deviations from the official code: the probe is the answer as the policy would write it right after the
history (after `lead`, empty by default because the history already ends with the assistant generation
prompt), not IGPO's `<think>…</think><answer>…</answer>` string, which is specific to its prompt format;
set `lead` to reproduce it. The answer turn (a turn without tool calls) gets no information gain: the outcome
reward scores it. A turn without an observation after it (cut by the turn or token limit) abstains.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agentrl.reward import Reward
from agentrl.types import Task, Trajectory

Mode = Literal["prob_diff", "log_prob_diff"]


def history_prefixes(trajectory: Trajectory) -> list[list[int]]:
    """h_0 … h_T: the token history before each turn, and after the last one (T + 1 prefixes)."""
    prefixes = [list(trajectory.prompt_ids)]
    for turn in trajectory.turns:
        prefixes.append(prefixes[-1] + list(turn.completion_ids) + list(turn.observation_ids))
    return prefixes


def gained_turns(trajectory: Trajectory) -> list[int]:
    """Indices of the turns that get an information gain: tool turns followed by an observation."""
    return [k for k, t in enumerate(trajectory.turns) if t.tool_calls and t.observation_ids]


def mean_logprobs(logprobs: Sequence[Sequence[float]], span: slice) -> list[float]:
    """Mean log-probability of the answer span of each probe (the log of IGPO's geometric-mean probability)."""
    return [sum(row[span]) / len(row[span]) for row in logprobs]


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


@dataclass
class ProbeStats:
    """What the probe cost; the trainer logs it per step as `reward_cost/<name>/probes`."""

    probes: int = 0
    """Teacher-forced rows (histories) scored; the policy batches them into its own forward passes."""


class InfoGain:
    """The IGPO turn reward; `mode` is `prob_diff` (the paper's) or `log_prob_diff` (the newer official script).

    Abstains when the task has no ground-truth answer or the policy cannot score continuations (a remote
    OpenAI-compatible endpoint, say).
    """

    def __init__(self, mode: Mode = "prob_diff", *, lead: str = "", name: str | None = None):
        information_gains([0.0, 0.0], mode)  # validates the mode now rather than mid-run
        self.mode = mode
        self.lead = lead
        self.name = name or ("info_gain" if mode == "prob_diff" else "info_gain_log")
        self.stats = ProbeStats()

    @property
    def probes(self) -> int:
        """Probe rows scored so far (one teacher-forced prefill row per history)."""
        return self.stats.probes

    def as_reward(self) -> Reward:
        return Reward(fn=self.turn_values, name=self.name, level="turns", inputs=("task", "trajectory", "policy"))

    async def turn_values(self, task: Task, trajectory: Trajectory, policy: Any) -> list[float | None] | None:
        turns = gained_turns(trajectory)
        if task.answer is None or not hasattr(policy, "score_continuations") or not turns:
            return None
        encode = policy.tokenizer.encode
        lead_ids = encode(self.lead, add_special_tokens=False) if self.lead else []
        answer_ids = encode(task.answer, add_special_tokens=False)
        if not answer_ids:
            return None
        # probe h_t and h_{t+1} for every gained turn t; shared histories are probed once
        needed = sorted({k for t in turns for k in (t, t + 1)})
        prefixes = history_prefixes(trajectory)
        logprobs = await policy.score_continuations(
            [prefixes[k] for k in needed], [lead_ids + answer_ids] * len(needed)
        )
        self.stats.probes += len(needed)
        value = dict(zip(needed, mean_logprobs(logprobs, slice(len(lead_ids), None)), strict=True))
        out: list[float | None] = [None] * len(trajectory.turns)
        for t in turns:
            out[t] = information_gains([value[t], value[t + 1]], self.mode)[0]
        return out


info_gain = InfoGain("prob_diff")
info_gain_log = InfoGain("log_prob_diff")
