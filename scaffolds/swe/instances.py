"""SWE-bench task instances: the record, loading it from local files, and finding its repository.

A row of a SWE-bench JSONL (or Parquet) file: `instance_id`, `repo` (`owner/name`), `base_commit`,
`problem_statement`, `patch` (gold), `test_patch`, `FAIL_TO_PASS` and `PASS_TO_PASS` (lists of pytest ids, or
JSON strings of such lists as the published datasets store them), optional `hints_text` and `version`. The
bundled tasks add `tier` and `split`; `visible_tests` (files or ids `run_tests` runs) is optional everywhere.

The repository at `base_commit` comes from `repos_dir` and nothing else: a git clone at
`repos_dir/<owner>__<name>` (bare or not), or a tarball of the tree at that commit named
`repos_dir/<instance_id>.tar.gz` or `repos_dir/<owner>__<name>.tar.gz` (one top-level directory is stripped).
"""

from __future__ import annotations

import base64
import io
import json
import tarfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from agentrl.scaffolds.swe.repo_build import archive

from agentrl.errors import InputError
from agentrl.json_lines import parse_json_lines, read_utf8
from agentrl.types import Task


@dataclass(frozen=True)
class SweInstance:
    """One SWE-bench task instance."""

    instance_id: str
    repo: str
    base_commit: str
    problem_statement: str
    patch: str
    test_patch: str
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...] = ()
    hints_text: str = ""
    version: str = ""
    tier: str | None = None
    split: str = "test"
    visible_tests: tuple[str, ...] = ()

    @classmethod
    def from_record(cls, row: dict[str, Any]) -> SweInstance:
        missing = [
            k for k in ("instance_id", "repo", "base_commit", "problem_statement", "FAIL_TO_PASS") if k not in row
        ]
        if missing:
            raise InputError(f"SWE instance {row.get('instance_id', '?')} lacks {', '.join(missing)}")
        return cls(
            instance_id=str(row["instance_id"]),
            repo=str(row["repo"]),
            base_commit=str(row["base_commit"]),
            problem_statement=str(row["problem_statement"]),
            patch=str(row.get("patch") or ""),
            test_patch=str(row.get("test_patch") or ""),
            fail_to_pass=_ids(row["FAIL_TO_PASS"]),
            pass_to_pass=_ids(row.get("PASS_TO_PASS") or []),
            hints_text=str(row.get("hints_text") or ""),
            version=str(row.get("version") or ""),
            tier=row.get("tier"),
            split=str(row.get("split") or "test"),
            visible_tests=_ids(row.get("visible_tests") or []),
        )

    def to_record(self) -> dict[str, Any]:
        record = asdict(self)
        record["FAIL_TO_PASS"] = list(record.pop("fail_to_pass"))
        record["PASS_TO_PASS"] = list(record.pop("pass_to_pass"))
        record["visible_tests"] = list(self.visible_tests)
        return record

    def to_task(self, repos_dir: str | Path, scaffold: str = "swe") -> Task:
        metadata = {"swe": self.to_record(), "repos_dir": str(repos_dir), "tier": self.tier or "unknown"}
        return Task(self.instance_id, self.problem_statement, None, metadata, split=self.split, scaffold=scaffold)

    @classmethod
    def from_task(cls, task: Task) -> SweInstance:
        return cls.from_record(task.metadata["swe"])


def _ids(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = json.loads(value) if value.strip().startswith("[") else [value]
    return tuple(str(v) for v in value)


def load_instances(path: str | Path) -> list[SweInstance]:
    """Instances from a local JSONL/JSON file, or a Parquet file read through `datasets` (nothing downloaded)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"SWE task file {path} does not exist")
    if path.suffix == ".parquet":
        import datasets

        datasets.disable_progress_bars()
        rows: list[dict[str, Any]] = list(datasets.load_dataset("parquet", data_files=str(path), split="train"))
    else:
        rows = read_json_rows(path)
    return [SweInstance.from_record(row) for row in rows]


def read_json_rows(path: str | Path) -> list[dict[str, Any]]:
    """The objects of a JSON list or a JSONL file; an `InputError` names what is not a JSON object."""
    text = read_utf8(path)
    if not text.lstrip().startswith("["):
        return [row for _, row in parse_json_lines(text, path)]
    try:
        rows = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}:{e.lineno}: not JSON ({e.msg})") from None
    if not all(isinstance(row, dict) for row in rows):
        raise InputError(f"{path}: every row must be a JSON object")
    return rows


def repository_archive(instance: SweInstance, repos_dir: str | Path) -> bytes:
    """The tree of the instance's repository at `base_commit` as a gzipped tar, from `repos_dir` only."""
    repos_dir = Path(repos_dir)
    slug = instance.repo.replace("/", "__")
    clone = repos_dir / slug
    if clone.is_dir():
        return archive(clone, instance.base_commit)
    for tarball in (repos_dir / f"{instance.instance_id}.tar.gz", repos_dir / f"{slug}.tar.gz"):
        if tarball.is_file():
            return _normalised_tarball(tarball)
    raise FileNotFoundError(
        f"no repository for {instance.instance_id}: expected a git clone at {clone} or a tarball "
        f"{repos_dir / (instance.instance_id + '.tar.gz')} (nothing is downloaded)"
    )


def repository_archive_b64(instance: SweInstance, repos_dir: str | Path) -> str:
    return base64.b64encode(repository_archive(instance, repos_dir)).decode()


def _normalised_tarball(path: Path) -> bytes:
    """The tarball's regular files and directories, without a `.git` and without one shared top directory."""
    with tarfile.open(path) as src:
        members = [m for m in src.getmembers() if m.isfile() or m.isdir()]
        tops = {m.name.split("/", 1)[0] for m in members}
        strip = len(tops) == 1 and any("/" in m.name for m in members)
        out = io.BytesIO()
        with tarfile.open(fileobj=out, mode="w:gz") as dst:
            for m in members:
                name = m.name.split("/", 1)[1] if strip and "/" in m.name else ("" if strip else m.name)
                if not name or name == ".git" or name.startswith(".git/"):
                    continue
                m.name = name
                dst.addfile(m, src.extractfile(m) if m.isfile() else None)
    return out.getvalue()
