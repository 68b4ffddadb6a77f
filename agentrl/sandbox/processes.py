"""Process-tree helpers on Linux `/proc`: find a process's descendants and kill them with their groups."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it, parents first (a snapshot; processes may come and go)."""
    found, frontier = [pid], [pid]
    while frontier:
        parent = frontier.pop()
        for task in _tasks(parent):
            try:
                children = (Path("/proc") / str(parent) / "task" / task / "children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                if child not in found:
                    found.append(child)
                    frontier.append(child)
    return found


def kill_tree(pid: int) -> list[int]:
    """SIGKILL `pid`, its descendants and every process group they lead or belong to; returns the pids killed."""
    pids = descendants(pid)
    groups = set()
    for p in pids:
        try:
            groups.add(os.getpgid(p))
        except ProcessLookupError:
            pass
    own_group = os.getpgid(0)
    for group in groups - {own_group}:
        _signal(os.killpg, group)
    for p in pids:
        _signal(os.kill, p)
    return pids


async def wait_gone(pids: list[int], timeout_s: float = 2.0) -> None:
    """Wait (at most `timeout_s`) until none of `pids` is alive: a SIGKILL is delivered asynchronously, and on a
    loaded machine a killed process can still be running for a few milliseconds after `kill` returns."""
    deadline = time.monotonic() + timeout_s
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        await asyncio.sleep(0.005)


def alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _tasks(pid: int) -> list[str]:
    try:
        return os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []


def _signal(send, target: int) -> None:
    try:
        send(target, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
