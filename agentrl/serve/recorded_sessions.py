"""A gateway's recording read back: the latest state of each episode of its `sessions.jsonl` (`load_recorded`), and
the recording as a task source (`recorded_openings`: one task per distinct opening, what `tasks=rec/` reads).

Training on a recording is `recorded.py`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any


def load_recorded(path: str | Path) -> list[dict[str, Any]]:
    """Episodes from a gateway's `sessions.jsonl` (its latest state of each episode)."""
    path = Path(path)
    if path.is_dir():
        path = path / "sessions.jsonl"
    latest: dict[str, dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            data = json.loads(line)
            latest[data["episode_id"]] = data
    return list(latest.values())


def recorded_openings(path: Path) -> list[dict[str, Any]]:
    """One task row per distinct opening of the recorded episodes whose history no client rewrote (a recording as a
    task source: `agentrl.tasks`)."""
    from agentrl.serve.messages import canonical

    rows: dict[str, dict[str, Any]] = {}
    for episode in load_recorded(path):
        if any(m["kind"] == "history" for m in episode["mismatches"]):
            continue  # its "opening" is a rewritten conversation, not what a client asked
        trajectory = episode["trajectory"]
        opening = first_request(trajectory["messages"], len(trajectory["turns"]))
        key = hashlib.sha1(json.dumps([canonical(m) for m in opening]).encode()).hexdigest()[:12]
        row = rows.setdefault(key, {"id": f"gateway/{key}", "messages": opening, "recorded_group": episode["group"]})
        row["recorded_episodes"] = row.get("recorded_episodes", 0) + 1
    return list(rows.values())


def first_request(messages: list[dict[str, Any]], turns: int) -> list[dict[str, Any]]:
    """The messages of an episode's first request: everything before the first of the `turns` assistant replies
    the gateway recorded (each turn added one; earlier assistant messages are the client's few-shot turns)."""
    replies = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    if turns < 1 or len(replies) < turns:
        return list(messages)
    return list(messages[: replies[len(replies) - turns]])
