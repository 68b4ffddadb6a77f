"""The unbiased pass@k estimator.

Chen et al. 2021, "Evaluating Large Language Models Trained on Code" (Codex), eq. 1: with n samples of a task
of which c succeed, pass@k = 1 − C(n−c, k) / C(n, k), the probability that at least one of k samples drawn
without replacement from the n succeeds; the benchmark score is its mean over tasks. Computed as a running
product (the paper's numerically stable form) instead of with binomials that overflow.
"""

from __future__ import annotations

from collections.abc import Iterable


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one task with `n` samples, `c` of them correct."""
    if not 0 <= c <= n or k < 1:
        raise ValueError(f"need 0 <= c <= n and k >= 1, got n={n}, c={c}, k={k}")
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples per task, got {n}")
    if n - c < k:
        return 1.0
    fail = 1.0
    for i in range(n - c + 1, n + 1):
        fail *= 1.0 - k / i
    return 1.0 - fail


def mean_pass_at_k(counts: Iterable[tuple[int, int]], k: int) -> float:
    """Mean pass@k over tasks given as (samples, correct) pairs; tasks with fewer than k samples are skipped."""
    values = [pass_at_k(n, c, k) for n, c in counts if n >= k]
    return sum(values) / len(values) if values else float("nan")


def k_values(samples: int) -> list[int]:
    """The k reported for `samples` per task: powers of two up to it, and `samples` itself."""
    ks = [1]
    while ks[-1] * 2 <= samples:
        ks.append(ks[-1] * 2)
    return ks if ks[-1] == samples else ks + [samples]
