"""Tasks from anywhere: local files and directories, Hugging Face datasets, and the gateway's recordings.

`TaskSourceConfig` is the `tasks.*` section of a run (`tasks=PATH` is short for `tasks.path=PATH`). A source is
read through `datasets` into named splits (tables); each row becomes a `Task`:

- the prompt is the `tasks.prompt_column` (default `prompt`, else `question`); a prompt that is a list of chat
  messages (the conversational format of TRL) opens the episode as `Task.messages`, as does the
  `tasks.messages_column` (default `messages`). Assistant messages after the last user or tool message are the
  reference reply, not part of the opening: the last one is the answer when the row has no answer column;
- `answer`, `id` and `split` come from their columns when the source has them; every other column lands in
  `Task.metadata`;
- a row goes to training or held-out by its split column, else by the split (table) it came from; without any
  held-out split, `tasks.test_fraction` of the training tasks is held out, drawn with `tasks.seed`.

A gateway recording (a directory holding the `sessions.jsonl` of `agentrl serve --record`) gives one task per
distinct opening that clients sent: the messages of an episode's first request. A hub dataset id goes through
`load_dataset`; offline (`HF_HUB_OFFLINE=1`) it is read from the local caches only, and a dataset in neither
fails with one line that says how to fetch it.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

from agentrl.errors import AgentRLError, ConfigError, InputError, one_line
from agentrl.json_lines import parse_json_lines, read_utf8
from agentrl.types import Task

_FORMATS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv"}
_COMPRESSED = {".gz", ".bz2", ".xz", ".zst"}
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")
_ROLES = ("system", "user", "assistant", "tool")


@dataclass(frozen=True)
class TaskSourceConfig:
    """Where tasks come from and how a source's rows become tasks."""

    primary_field: ClassVar[str] = "path"
    """The field a bare value sets: `tasks=data.jsonl` is `tasks.path=data.jsonl`."""

    path: str | None = None
    """The tasks (`tasks=PATH` for short): a JSONL, JSON, Parquet or CSV file; a directory of such files (files
    named `train*` / `test*` are those splits) or one written by `save_to_disk`; a gateway recording (a directory
    holding `sessions.jsonl`); or a Hugging Face dataset id `org/name`."""
    config: str | None = None
    """Configuration (subset) of a hub dataset or dataset directory, as `load_dataset(path, config)` takes it."""
    train_split: str | None = None
    """Split to train on (a split of the source, or a value of its split column); None = `train`, or the
    source's only split."""
    test_split: str | None = None
    """Held-out split evaluated during training; None = `test` when the source has one."""
    test_fraction: float = 0.0
    """When the source has no held-out split, hold out this fraction of the training tasks (0 = none)."""
    seed: int = 0
    """Seed of the draw of held-out tasks (`tasks.test_fraction`)."""
    prompt_column: str | None = None
    """Column of the prompt: text, or a list of chat messages; None = `prompt`, else `question`."""
    messages_column: str | None = None
    """Column of chat messages that open the episode (`[{"role": …, "content": …}, …]`: a system prompt, few-shot
    turns); None = `messages` when the source has it."""
    answer_column: str | None = None
    """Column of the reference answer; None = `answer` when the source has it."""
    id_column: str | None = None
    """Column of task ids (unique within a split); None = `id` when the source has it, else `<name>/<row>`."""
    split_column: str | None = None
    """Column naming each row's split; None = `split` when the source has it, else the split a row came from."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.test_fraction < 1.0:
            raise ConfigError(f"tasks.test_fraction must be in [0, 1), got {self.test_fraction}")

    def __bool__(self) -> bool:
        """Whether a source is set, so that `if config.tasks:` reads as "tasks were given"."""
        return self.path is not None


def load_task_file(source: TaskSourceConfig | str | Path) -> list[Task]:
    """Every task of a source (a `TaskSourceConfig`, a path or a dataset id), its `split` set to `train`, `test`
    or, for rows of other splits, their split's name. Raises `InputError` for a source that cannot be read."""
    import datasets

    datasets.disable_progress_bars()
    config = source if isinstance(source, TaskSourceConfig) else TaskSourceConfig(path=str(source))
    if not config.path:
        raise ConfigError("no task source: set tasks.path (a file, a directory or a dataset id)")
    tables, lines = _tables(config)
    train, test = _split_names(config, tables)
    single = len(tables) == 1
    stem = _stem(config.path)
    lines = lines if single else None
    tasks: list[Task] = []
    for name, rows in tables.items():
        if not single and name not in (train, test):
            continue
        columns = _columns(config, _column_names(rows))
        prefix = stem if single else f"{stem}/{name}"
        numbered = lines is not None and len(lines) == len(rows)  # a row of a JSON-lines file is named by its line
        for i, row in enumerate(rows):
            where = f"{config.path}:{lines[i]}" if numbered else f"{config.path}: row {i}"
            task = _task(row, columns, where=where, default_id=f"{prefix}/{i}")
            split = str(row.get(columns["split"]) or name) if columns["split"] else name
            tasks.append(replace(task, split="train" if split == train else "test" if split == test else split))
    if not tasks:
        among = "" if single else f" in a train or test split (its splits: {', '.join(tables)}; see tasks.train_split)"
        raise InputError(f"{config.path} holds no tasks{among}")
    tasks = _hold_out(tasks, config)
    _check_unique_ids(tasks, config.path)
    return tasks


def tasks_from_rows(rows: Sequence[Mapping[str, Any] | Task], config: TaskSourceConfig | None = None) -> list[Task]:
    """Tasks from rows in memory (dicts read as a task file's rows are, through `config`'s column mapping, or
    `Task`s kept as they are); a row's `split` (default `train`) is its split."""
    config = config or TaskSourceConfig()
    for i, row in enumerate(rows):
        if not isinstance(row, (Task, Mapping)):
            raise InputError(f"task {i} is neither a Task nor a dict (got {type(row).__name__})")
    names = sorted({k for row in rows if isinstance(row, Mapping) for k in row})
    columns = _columns(config, names) if names else {}
    tasks = []
    for i, row in enumerate(rows):
        if isinstance(row, Task):
            tasks.append(row)
            continue
        task = _task(dict(row), columns, where=f"task {i}", default_id=f"task/{i}")
        tasks.append(replace(task, split=str(row.get(columns["split"]) or "train") if columns["split"] else "train"))
    _check_unique_ids(tasks, "the tasks given")
    return tasks


def task_source(source: TaskSourceConfig | str | Path) -> Callable[[str], list[Task]]:
    """A `split -> tasks` function over a task source, as scaffolds take it."""
    tasks = load_task_file(source)
    return lambda split: [t for t in tasks if t.split == split]


def select_tiers(tasks: Iterable[Task], tiers: Sequence[str]) -> list[Task]:
    """The tasks whose `metadata["tier"]` is in `tiers`; every task when `tiers` is empty."""
    return [t for t in tasks if not tiers or t.metadata.get("tier") in tiers]


# --- reading a source into named tables -------------------------------------------------------------------


def _tables(config: TaskSourceConfig) -> tuple[dict[str, Any], list[int] | None]:
    """The source's tables by split name, and for a JSON-lines file the number of the line each row is on."""
    import datasets

    assert config.path is not None
    path = Path(config.path)
    recording = path / "sessions.jsonl" if path.is_dir() else path
    if recording.name == "sessions.jsonl" and recording.is_file():
        _no_config(config, "a gateway recording")
        from agentrl.serve.recorded_sessions import recorded_openings

        return {"train": recorded_openings(recording)}, _json_lines(path)
    lines = None
    if path.is_dir() and ((path / "dataset_dict.json").is_file() or (path / "state.json").is_file()):
        _no_config(config, "a directory written by save_to_disk")
        loaded = _read(config, datasets.load_from_disk, str(path))
    elif path.is_dir():
        loaded = _read(config, datasets.load_dataset, str(path), config.config)
    elif path.is_file():
        _no_config(config, "a file")
        if not path.stat().st_size:
            raise InputError(f"{config.path} holds no tasks (the file is empty)")
        lines = _json_lines(path)  # a malformed line is named by its number before `datasets` reads the file
        loaded = _read(config, datasets.load_dataset, _builder(path), data_files=str(path))
    elif _HUB_ID.fullmatch(config.path) and _builder_suffix(path) not in _FORMATS:
        loaded = _hub_dataset(config)
    else:
        raise InputError(f"task source {config.path} does not exist (give a file, a directory or a dataset id)")
    return (dict(loaded) if isinstance(loaded, datasets.DatasetDict) else {"train": loaded}), lines


def _read(config: TaskSourceConfig, load: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    import logging

    from datasets.exceptions import DatasetGenerationError

    quiet = logging.getLogger("datasets")
    level, quiet.level = quiet.level, logging.CRITICAL  # its own report of a failed read would be a second line
    try:
        return load(*args, **kwargs)
    except AgentRLError:
        raise
    except (OSError, ValueError, IndexError, StopIteration) as e:  # how `datasets` meets empty or odd data
        raise InputError(f"cannot read tasks from {config.path}: {one_line(e)}") from e
    except DatasetGenerationError as e:  # what went wrong is its cause (a parser's error)
        raise InputError(f"cannot read tasks from {config.path}: {one_line(e.__cause__ or e)}") from e
    finally:
        quiet.level = level


def _json_lines(path: Path) -> list[int] | None:
    """For a JSON-lines file (`.jsonl`, or `.json` holding one object per line): the number of each line that
    holds a row, after checking that each is a JSON object (an `InputError` names the first that is not, as
    `file:line`); None for other files."""
    suffix = "".join(path.suffixes[-1:]).lower()
    if suffix not in (".jsonl", ".json") or not path.is_file():
        return None
    text = read_utf8(path)
    if suffix == ".json":
        try:
            json.loads(text)
            return None  # one JSON document (a list of rows): `datasets` reads it
        except json.JSONDecodeError as e:
            if e.msg != "Extra data":
                raise InputError(f"{path}:{e.lineno}: not JSON ({e.msg})") from None
    return [number for number, _ in parse_json_lines(text, path)]


def _hub_dataset(config: TaskSourceConfig) -> Any:
    """A hub dataset: through `load_dataset` (which reads only its own cache when offline), else from a snapshot
    in the hub cache (`hf download --repo-type dataset ID` puts one there), else a one-line `InputError`."""
    import datasets
    from huggingface_hub import snapshot_download

    dataset_id = config.path
    try:
        return datasets.load_dataset(dataset_id, config.config)
    except ConnectionError:
        pass  # offline, or the hub is unreachable: the hub cache may still hold the files
    except (OSError, ValueError) as e:
        raise InputError(f"cannot load dataset {dataset_id!r}: {one_line(e)}") from e
    try:
        snapshot = snapshot_download(dataset_id, repo_type="dataset", local_files_only=True)
    except (OSError, ValueError):
        offline = " (offline mode is on)" if datasets.config.HF_HUB_OFFLINE else ""
        raise InputError(
            f"dataset {dataset_id!r} is not in the local Hugging Face cache and the hub cannot be reached{offline}: "
            f"fetch it where there is network with `hf download --repo-type dataset {dataset_id}` (older "
            "huggingface_hub: `huggingface-cli download`), or pass a local copy (tasks.path=DIR, e.g. one "
            "written by save_to_disk)"
        ) from None
    return _read(config, datasets.load_dataset, snapshot, config.config)


def _builder(path: Path) -> str:
    suffix = _builder_suffix(path)
    if suffix not in _FORMATS:
        raise InputError(f"{path}: unknown task file format {suffix!r}; use .jsonl, .json, .parquet or .csv")
    return _FORMATS[suffix]


def _builder_suffix(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes]
    while suffixes and suffixes[-1] in _COMPRESSED:
        suffixes.pop()
    return suffixes[-1] if suffixes else ""


def _no_config(config: TaskSourceConfig, kind: str) -> None:
    if config.config is not None:
        raise InputError(f"tasks.config names a configuration of a dataset; {config.path} is {kind}, which has none")


def _stem(path: str) -> str:
    name = Path(path.rstrip("/")).name
    return name.split(".")[0] if Path(path).is_file() else name


# --- rows into tasks ------------------------------------------------------------------------------------------


def _column_names(rows: Any) -> list[str]:
    if hasattr(rows, "column_names"):
        return list(rows.column_names)
    return list(dict.fromkeys(k for row in rows for k in row))


def _split_names(config: TaskSourceConfig, tables: dict[str, Any]) -> tuple[str | None, str | None]:
    """The names of the training and held-out splits, among the tables and the values of the split column."""
    available = set(tables)
    for rows in tables.values():
        column = _columns(config, _column_names(rows))["split"]
        if column:
            values = rows.unique(column) if hasattr(rows, "unique") else [r.get(column) for r in rows]
            available |= {str(v) for v in values if v}
    for option in ("train_split", "test_split"):
        name = getattr(config, option)
        if name is not None and name not in available:
            splits = ", ".join(sorted(available))
            raise InputError(f"{config.path} has no split {name!r} (tasks.{option}); its splits: {splits}")
    others = [name for name in tables if name != (config.test_split or "test")]
    train = config.train_split or ("train" if "train" in available else others[0] if len(others) == 1 else None)
    test = config.test_split or ("test" if "test" in available else None)
    return train, test


def _columns(config: TaskSourceConfig, names: Sequence[str]) -> dict[str, Any]:
    """The columns each part of a task is read from (None: the source has none)."""

    def pick(option: str, defaults: tuple[str, ...]) -> tuple[str, ...]:
        explicit = getattr(config, option)
        if explicit is None:
            return tuple(d for d in defaults if d in names)
        if explicit not in names:
            raise InputError(
                f"{config.path} has no column {explicit!r} (tasks.{option}); its columns: {', '.join(names)}"
            )
        return (explicit,)

    columns: dict[str, Any] = {"prompt": pick("prompt_column", ("prompt", "question"))}
    for part in ("messages", "answer", "id", "split"):
        found = pick(f"{part}_column", (part,))
        columns[part] = found[0] if found else None
    if not columns["prompt"] and not columns["messages"]:
        raise InputError(
            f"{config.path} has no prompt column: set tasks.prompt_column or tasks.messages_column; "
            f"its columns: {', '.join(names)}"
        )
    return columns


def _task(row: dict[str, Any], columns: dict[str, Any], *, where: str, default_id: str) -> Task:
    prompt = next((row[c] for c in columns["prompt"] if row.get(c) not in (None, "")), None)
    raw = row.get(columns["messages"]) if columns["messages"] else None
    if isinstance(prompt, (list, tuple)):  # a conversational prompt: messages, not text
        raw, prompt = (prompt if raw is None else raw), None
    messages, reference = _opening(raw, where) if raw is not None else ((), None)
    if prompt is None and not messages:
        wanted = " or ".join(repr(c) for c in (*columns["prompt"], columns["messages"]) if c)
        raise InputError(f"{where} has no {wanted}")
    if prompt is None:
        prompt = next(m["content"] for m in reversed(messages) if m["role"] == "user")
    answer = row.get(columns["answer"]) if columns["answer"] else None
    answer = reference if answer is None else answer
    ident = row.get(columns["id"]) if columns["id"] else None
    used = {*columns["prompt"], *(columns[p] for p in ("messages", "answer", "id", "split"))}
    return Task(
        id=default_id if ident in (None, "") else str(ident),
        prompt=str(prompt),
        answer=None if answer is None else str(answer),
        metadata={k: v for k, v in row.items() if k not in used and v is not None},
        messages=messages,
    )


def _opening(raw: Any, where: str) -> tuple[tuple[dict[str, Any], ...], str | None]:
    """Chat messages in the form the chat template renders (as the gateway renders a client's), and the content
    of a trailing assistant reply (the reference answer), cut from the opening."""
    from agentrl.serve.messages import template_message

    if not isinstance(raw, (list, tuple)) or not raw:
        raise InputError(f"{where}: messages must be a non-empty list of {{role, content}} objects, got {raw!r:.80}")
    messages = []
    for message in raw:
        if not isinstance(message, dict) or message.get("role") not in _ROLES:
            raise InputError(f"{where}: a message needs a role among {', '.join(_ROLES)}, got {message!r:.80}")
        try:  # columnar formats give every message every key of the column, None where it had none
            messages.append(template_message({k: v for k, v in message.items() if v is not None}))
        except (KeyError, TypeError, AttributeError) as e:
            raise InputError(f"{where}: malformed message {message!r:.80} ({one_line(e)})") from e
    reference = messages[-1]["content"] if messages[-1]["role"] == "assistant" else None
    while messages and messages[-1]["role"] == "assistant":
        messages.pop()
    if not any(m["role"] == "user" for m in messages):
        raise InputError(f"{where}: the messages hold no user message")
    return tuple(messages), reference


def _hold_out(tasks: list[Task], config: TaskSourceConfig) -> list[Task]:
    """Hold out `test_fraction` of the training tasks (seeded) when the source has no held-out split."""
    train = [i for i, t in enumerate(tasks) if t.split == "train"]
    if not config.test_fraction or any(t.split == "test" for t in tasks) or len(train) < 2:
        return tasks
    count = min(max(1, round(config.test_fraction * len(train))), len(train) - 1)
    held = set(random.Random(config.seed).sample(train, count))
    return [replace(t, split="test") if i in held else t for i, t in enumerate(tasks)]


def _check_unique_ids(tasks: list[Task], source: str) -> None:
    seen: set[tuple[str, str]] = set()
    for task in tasks:
        if (task.split, task.id) in seen:
            raise InputError(
                f"{source}: task id {task.id!r} appears twice in split {task.split!r}; "
                "set tasks.id_column to a column of unique ids"
            )
        seen.add((task.split, task.id))
