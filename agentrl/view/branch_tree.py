"""`branch_tree`: the trajectories of one group of a branching run (ARPO / AEPO) as the tree they forked into.

A fork records its parent and `branch_turn`, the first turn it does not share with it. The rollout engine decided
that fork after the parent's turn `branch_turn − 1` and its tool results, on that turn's segment entropy (the
summed entropy of its first `rollout.branch_entropy_tokens` sampled tokens over ln|V|) against the parent's
first tool round's (ΔH); both are computed again here from the entropies the trajectory file holds, with
`agentrl.rollout.branching.segment_entropy`, the function the engine used.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentrl.rollout.branching import segment_entropy


def branch_tree(
    summaries: list[dict[str, Any]],
    read: Callable[[int], dict[str, Any]],
    *,
    entropy_tokens: int,
    vocab_size: int | None,
) -> list[dict[str, Any]]:
    """The roots of the group's tree; each node is a trajectory summary with `children` and, for a fork, `fork`
    (`turn`, `entropy`, `delta_entropy`). `read(index)` reads a whole record (only parents are read)."""
    by_id = {s["trajectory_id"]: {**s, "children": []} for s in summaries}
    roots = []
    parents: dict[str, dict[str, Any]] = {}
    for node in by_id.values():
        parent = by_id.get(node.get("parent_id"))
        if parent is None:
            roots.append(node)
            continue
        parent["children"].append(node)
        if parent["trajectory_id"] not in parents:
            parents[parent["trajectory_id"]] = read(parent["index"])
        node["fork"] = _fork(parents[parent["trajectory_id"]], node.get("branch_turn"), entropy_tokens, vocab_size)
    return roots


def _fork(parent: dict[str, Any], branch_turn: Any, tokens: int, vocab_size: int | None) -> dict[str, Any]:
    """Where a fork left its parent and the entropy that decided it."""
    turns = parent.get("turns") or []
    if not isinstance(branch_turn, int) or not 0 < branch_turn <= len(turns):
        return {"turn": branch_turn, "entropy": None, "delta_entropy": None}
    entropy = segment_entropy(turns[branch_turn - 1].get("entropies") or [], tokens, vocab_size)
    own_start = parent.get("branch_turn") or 0  # a fork's baseline is its own first tool round
    first_round = next((k for k in range(own_start, len(turns)) if turns[k].get("tool_calls")), None)
    baseline = (
        segment_entropy(turns[first_round].get("entropies") or [], tokens, vocab_size)
        if first_round is not None
        else None
    )
    return {
        "turn": branch_turn,
        "entropy": round(entropy, 4),
        "delta_entropy": round(entropy - baseline, 4) if baseline is not None else None,
    }
