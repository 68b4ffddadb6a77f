"""Load tasks from local JSONL or Parquet files (through `datasets`; nothing is downloaded).

Each row needs a `prompt` (or `question`); `answer`, `id` and `split` (`train` / `test`, default `train`) are
optional, and every other column lands in `Task.metadata`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from agentrl.errors import InputError
from agentrl.types import Task

_KNOWN = {"id", "prompt", "question", "answer", "split"}


def load_task_file(path: str | Path) -> list[Task]:
    import datasets

    datasets.disable_progress_bars()
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"task file {path} does not exist")
    kind = "parquet" if path.suffix == ".parquet" else "json"
    rows = datasets.load_dataset(kind, data_files=str(path), split="train")
    tasks = []
    for i, row in enumerate(rows):
        prompt = row.get("prompt") or row.get("question")
        if not prompt:
            raise InputError(f"{path}: row {i} has no 'prompt' (or 'question')")
        answer = row.get("answer")
        tasks.append(
            Task(
                id=str(row.get("id") or f"{path.stem}/{i}"),
                prompt=str(prompt),
                answer=None if answer is None else str(answer),
                split=str(row.get("split") or "train"),
                metadata={k: v for k, v in row.items() if k not in _KNOWN and v is not None},
            )
        )
    return tasks


def task_source(path: str | Path) -> Callable[[str], list[Task]]:
    """A `split -> tasks` function over a task file, as scaffolds take it."""
    tasks = load_task_file(path)
    return lambda split: [t for t in tasks if t.split == split]


def select_tiers(tasks: Iterable[Task], tiers: Sequence[str]) -> list[Task]:
    """The tasks whose `metadata["tier"]` is in `tiers`; every task when `tiers` is empty."""
    return [t for t in tasks if not tiers or t.metadata.get("tier") in tiers]
