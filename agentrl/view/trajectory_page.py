"""`trajectory_page`: one trajectory record as the page shows it, turn by turn.

The record is a line of `trajectories/*step_*.jsonl` (`write_trajectories`); the page gets it with the token ids
decoded by the run's tokenizer: the rendered prompt, each turn's sampled tokens (each with its piece of text, the
sampler's log-prob and entropy, the learner's log-prob where the update recorded it), the reasoning, tool calls
and results (errors typed), parse errors, turn rewards, each turn's advantage, and the text appended after the turn
(tool results as the model read them, a correction after a parse error, the next generation prompt). Everything
stays data: the page puts it into the document as text, never as markup.
"""

from __future__ import annotations

import math
from typing import Any

from agentrl.view.token_decoder import TokenDecoder


def trajectory_page(record: dict[str, Any], decoder: TokenDecoder) -> dict[str, Any]:
    """The page's view of `record` (see the module docstring)."""
    header = {key: value for key, value in record.items() if key not in ("turns", "prompt_ids", "messages")}
    prompt_ids = record.get("prompt_ids") or []
    return {
        **header,
        "prompt": {"text": decoder.text(prompt_ids), "tokens": len(prompt_ids)},
        "messages": record.get("messages") or [],
        "turns": [_turn(k, turn, decoder) for k, turn in enumerate(record.get("turns") or [])],
        "decoder": {"source": decoder.source, "reason": decoder.reason},
    }


def _turn(k: int, turn: dict[str, Any], decoder: TokenDecoder) -> dict[str, Any]:
    ids = list(turn.get("completion_ids") or [])
    observation = list(turn.get("observation_ids") or [])
    return {
        "index": k,
        "text": decoder.text(ids),
        "reasoning": turn.get("reasoning"),
        "parse_error": turn.get("parse_error"),
        "tool_calls": turn.get("tool_calls") or [],
        "tool_results": [_tool_result(r) for r in turn.get("tool_results") or []],
        "observation": decoder.text(observation),
        "observation_tokens": len(observation),
        "reward": finite(turn.get("reward")),
        "reward_components": turn.get("reward_components") or {},
        "advantage": finite(turn.get("advantage")),
        "trained": turn.get("trained"),
        "tokens": {
            "ids": ids,
            "pieces": decoder.pieces(ids),
            "logprobs": _aligned(turn.get("logprobs"), len(ids)),
            "entropies": _aligned(turn.get("entropies"), len(ids)),
            "learner_logprobs": _aligned(turn.get("learner_logprobs"), len(ids)),
        },
    }


def _tool_result(result: dict[str, Any]) -> dict[str, Any]:
    content = result.get("content")
    if isinstance(content, list):  # content parts: their text, and a marker for anything else (an image)
        content = "\n".join(
            p.get("text", f"[{p.get('type', 'part')}]") if isinstance(p, dict) else str(p) for p in content
        )
    return {
        "call_id": result.get("call_id"),
        "content": content if isinstance(content, str) else str(content),
        "is_error": bool(result.get("is_error")),
        "error_type": result.get("error_type"),
        "elapsed_s": finite(result.get("elapsed_s")),
    }


def _aligned(values: Any, n: int) -> list[float | None] | None:
    """`values` as one finite float (or None) per token, or None when the record has none for this turn."""
    if not isinstance(values, list) or len(values) != n:
        return None
    return [finite(v) for v in values]


def finite(value: Any) -> float | None:
    """A number JSON can carry (NaN and infinities become None)."""
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None
