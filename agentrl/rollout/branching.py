"""ARPO/AEPO branching policy: when a rollout forks at a tool result, and how a task's budget is split.

Pure functions and one per-batch state record; the rollout engine (`agentrl/rollout/collect.py`) does the forking.
Sources: ARPO (Dong et al. 2025, arXiv 2507.19849, code dongguanting/ARPO@e257337) and AEPO (Dong et al. 2025,
arXiv 2510.14545, code RUC-NLPIR/ARPO `AEPO/`); the exact rules are in reference/algorithms.md §3.1–3.2, §7.1.

- Segment entropy: the summed entropy of the first ≤ `tokens` tokens a rollout samples after a tool result,
  divided by ln|V|. Deviation: ARPO sums a top-10-truncated entropy (what vLLM's logprobs=10 gives); we have
  the exact entropy of the sampling distribution, so values are a little larger. Only differences matter.
- ΔH = H_now − H_init, where H_init is the rollout's first segment (a fork's first own segment).
- ARPO: fork iff U − w·ΔH ≤ τ, i.e. with probability clip(τ + w·ΔH, 0, 1) (for τ in [0, 1]).
- AEPO: fork iff clip((U + w·ΔH)·max(0, 1 − penalty·c), 0, 1) ≥ τ, c = consecutive branching rounds of the task.
- AEPO pre-monitoring: m = clamp(int(k·σ(β·(H_root − H̄_tool))) + 1, 1, k) rollouts start from the prompt; the
  other k − m come from forks. Deviation: AEPO spends one extra rollout per task on the monitor; here the monitor
  is rollout 0 of the task, one of its k trained trajectories (it never forks), so it costs no extra rollout but
  the task's other rollouts start only when it has finished: with `dynamic_initial` a group takes about one full
  rollout longer, and its first rollout is played with no forks where the static split would allow them.
- At most b − 1 forks per rollout per tool round, never more than k rollouts per task.

All entropy state lives in a `BranchState` made per batch: ARPO's and AEPO's released code keep the initial
entropies in an attribute that is never cleared, so later batches read stale baselines; here a new batch
starts empty by construction.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from agentrl.errors import ConfigError

BRANCHING_MODES = ("none", "arpo", "aepo")


@dataclass(frozen=True)
class BranchRule:
    """The branching hyper-parameters (names as in algorithms.md §3.1–3.2)."""

    mode: str = "arpo"
    """`arpo` or `aepo`."""
    rollouts_per_task: int = 8
    """k (ARPO's n): trajectories per task, forks included."""
    initial_rollouts: int = 4
    """m: rollouts started from the prompt (global sampling)."""
    beam_size: int = 2
    """b: a rollout forks at most b − 1 times per tool round."""
    threshold: float = 0.5
    """τ."""
    entropy_weight: float = 0.2
    """w."""
    entropy_tokens: int = 20
    """Tokens after a tool result whose entropies make a segment's entropy."""
    consecutive_penalty: float = 0.05
    """AEPO: the probability is scaled by max(0, 1 − penalty·c)."""
    dynamic_initial: bool = False
    """AEPO pre-monitoring: choose m per task from the entropies of its first rollout. That rollout is one of the
    task's k trained trajectories and never forks, and the task's other rollouts wait until it has finished."""
    premonitor_beta: float = 0.5
    """β of the pre-monitoring sigmoid."""

    def __post_init__(self) -> None:
        if self.mode not in BRANCHING_MODES[1:]:
            raise ConfigError(f"branching mode must be arpo or aepo, not {self.mode!r}")
        if not 1 <= self.initial_rollouts <= self.rollouts_per_task:
            raise ConfigError("initial rollouts must be in [1, rollouts per task]")
        if self.beam_size < 1:
            raise ConfigError("beam size must be >= 1")


def segment_entropy(entropies: Sequence[float], tokens: int = 20, vocab_size: int | None = None) -> float:
    """Summed entropy of the first `tokens` sampled tokens, over ln|V| when the vocabulary size is given."""
    total = float(sum(entropies[:tokens]))
    return total / math.log(vocab_size) if vocab_size and vocab_size > 1 else total


def arpo_forks(u: float, delta_h: float, *, weight: float = 0.2, threshold: float = 0.5) -> bool:
    """ARPO's test on one uniform draw: fork iff clip(U − w·ΔH, 0, 1) ≤ τ."""
    return min(max(u - weight * delta_h, 0.0), 1.0) <= threshold


def aepo_forks(
    u: float,
    delta_h: float,
    consecutive: int,
    *,
    weight: float = 0.2,
    threshold: float = 0.5,
    penalty: float = 0.05,
) -> bool:
    """AEPO's test on one uniform draw: fork iff clip((U + w·ΔH)·max(0, 1 − penalty·c), 0, 1) ≥ τ."""
    p = (u + weight * delta_h) * max(0.0, 1.0 - penalty * consecutive)
    return min(max(p, 0.0), 1.0) >= threshold


def fork_probability(
    mode: str,
    delta_h: float,
    consecutive: int = 0,
    *,
    weight: float = 0.2,
    threshold: float = 0.5,
    penalty: float = 0.05,
) -> float:
    """The probability over U ~ U(0,1) that the test of `mode` forks (for τ in (0, 1])."""
    if mode == "arpo":
        return min(max(threshold + weight * delta_h, 0.0), 1.0)
    scale = max(0.0, 1.0 - penalty * consecutive)
    if scale == 0.0:
        return 0.0
    return min(max(1.0 - (threshold / scale - weight * delta_h), 0.0), 1.0)


def forks(rule: BranchRule, u: float, delta_h: float, consecutive: int) -> bool:
    if rule.mode == "arpo":
        return arpo_forks(u, delta_h, weight=rule.entropy_weight, threshold=rule.threshold)
    return aepo_forks(
        u, delta_h, consecutive, weight=rule.entropy_weight, threshold=rule.threshold, penalty=rule.consecutive_penalty
    )


def initial_rollouts(k: int, h_root: float, h_tool_mean: float, *, beta: float = 0.5) -> int:
    """AEPO pre-monitoring: m = clamp(int(k·σ(β·(H_root − H̄_tool))) + 1, 1, k)."""
    sigmoid = 1.0 / (1.0 + math.exp(-beta * (h_root - h_tool_mean)))
    return min(max(int(k * sigmoid) + 1, 1), k)


@dataclass
class BranchDecision:
    """One fork test, for logs and tests."""

    task_id: str
    trajectory_id: str
    turn: int
    attempt: int
    u: float
    delta_h: float
    consecutive: int
    forked: bool


@dataclass
class TaskBudget:
    """One task's rollouts in one batch."""

    k: int
    m: int
    started: int = 0
    active: int = 0
    consecutive: int = 0
    """AEPO's c_q: tool rounds in a row (over the task's rollouts, in the order they happen) that forked."""

    @property
    def slots_left(self) -> int:
        return self.k - self.started


@dataclass
class BranchState:
    """All entropy state of one batch: baselines per rollout, budgets per task, and the decisions taken."""

    initial_entropy: dict[str, float] = field(default_factory=dict)
    budgets: dict[str, TaskBudget] = field(default_factory=dict)
    decisions: list[BranchDecision] = field(default_factory=list)

    def delta_h(self, trajectory_id: str, h_now: float) -> float:
        """ΔH against the rollout's first segment (which becomes the baseline the first time it is seen)."""
        h_init = self.initial_entropy.setdefault(trajectory_id, h_now)
        return h_now - h_init
