"""The terminal scaffold's bundled tasks, in three tiers, with a fixed train/held-out split.

Every tier holds tasks of both splits, marked by hand so that each held-out task exercises a skill the training
tasks also need (files, counting, pipelines, permissions, repairs) without sharing its prompt. The easy tier also
holds a generated family (`easy_family.py`) whose held-out tasks use names no training task uses.
"""

from __future__ import annotations

import functools

from agentrl.scaffolds.terminal.spec import TIERS, TerminalTask

from agentrl.types import Task

SPLITS = ("train", "test")


@functools.cache
def specs() -> tuple[TerminalTask, ...]:
    """Every bundled task's spec, easy tier first."""
    from agentrl.scaffolds.terminal import easy, easy_family, hard, medium

    generated = (*easy_family.family("train"), *easy_family.family("test"))
    out = (*easy.TASKS, *generated, *medium.TASKS, *hard.TASKS)
    ids = [(s.tier, s.slug) for s in out]
    if len(set(ids)) != len(ids) or any(s.tier not in TIERS or s.split not in SPLITS for s in out):
        raise ValueError("terminal task specs need unique (tier, slug) pairs, known tiers and known splits")
    return out


def tasks(split: str) -> list[Task]:
    """The bundled tasks of one split (`train` or `test`), in a fixed order."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    return [s.to_task() for s in specs() if s.split == split]
