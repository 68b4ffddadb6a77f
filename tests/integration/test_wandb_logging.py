"""`logging.wandb=true`: a real two-step `agentrl train` mirrors its metrics, config and plots to a W&B run (offline
mode, under a temporary $WANDB_DIR), and `agentrl train --resume` continues the same W&B run.

An offline run keeps what it logged in its transaction log, `run-<id>.wandb` (what `wandb sync` uploads): a W&B
LevelDB-style log of `wandb.proto.wandb_internal_pb2.Record` messages, read back here.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentrl.runlog.metrics_file import read_metrics

pytestmark = pytest.mark.integration

ARGS = [
    "--scaffold", "search",
    "trainer.steps=2", "rollout.prompts_per_step=2", "rollout.samples_per_prompt=2", "rollout.max_turns=2",
    "eval.every_steps=2", "eval.max_tasks=2", "progress=false", "tensorboard=false",
    "logging.wandb=true", "logging.wandb_tags=[smoke,search]", "logging.wandb_group=arms",
]  # fmt: skip

LOG_HEADER = struct.Struct("<4sHB")  # b":W&B", magic 0xBEE1, version 0
RECORD_HEADER = struct.Struct("<IHB")  # checksum, length, type (1 full, 2 first, 3 middle, 4 last)
BLOCK_BYTES = 32 * 1024


def read_transaction_log(path: Path) -> list[Any]:
    """The `Record`s of a `.wandb` file, in order."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    ident, magic, _ = LOG_HEADER.unpack_from(data)
    assert (ident, magic) == (b":W&B", 0xBEE1)
    payloads, pending, pos = [], b"", LOG_HEADER.size
    while pos + RECORD_HEADER.size <= len(data):
        if BLOCK_BYTES - pos % BLOCK_BYTES < RECORD_HEADER.size:  # a block's tail too short for a header is padding
            pos += BLOCK_BYTES - pos % BLOCK_BYTES
            continue
        _, length, kind = RECORD_HEADER.unpack_from(data, pos)
        if kind == 0:
            break
        chunk = data[pos + RECORD_HEADER.size : pos + RECORD_HEADER.size + length]
        pos += RECORD_HEADER.size + length
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            payloads.append(pending)
    records = []
    for payload in payloads:
        record = wandb_internal_pb2.Record()
        record.ParseFromString(payload)
        records.append(record)
    return records


def offline_run(run_path: Path) -> dict[str, Any]:
    """What an offline run directory holds: the run record's id, name, tags, group and config, and the history as
    {step: {key: value}} (an image is its dict of fields)."""
    [log] = run_path.glob("run-*.wandb")
    out: dict[str, Any] = {"history": {}, "config": {}}
    for record in read_transaction_log(log):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run = record.run
            out.update(id=run.run_id, name=run.display_name, tags=list(run.tags), group=run.run_group)
            out["config"].update({item.key: json.loads(item.value_json) for item in run.config.update})
        elif kind == "config":
            out["config"].update({item.key: json.loads(item.value_json) for item in record.config.update})
        elif kind == "history":
            row = out["history"].setdefault(record.history.step.num, {})
            for item in record.history.item:
                key, *field = [item.key] if item.key else list(item.nested_key)
                value = json.loads(item.value_json)
                if field:
                    row.setdefault(key, {})[field[0]] = value
                else:
                    row[key] = value
    return out


def train(tmp_path: Path, *args: str) -> None:
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path / "wandb_dir"), "WANDB_SILENT": "true"}
    env.pop("WANDB_API_KEY", None)
    done = subprocess.run([sys.executable, "-m", "agentrl", "train", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]


def test_train_mirrors_metrics_config_and_plots_to_wandb_and_resume_continues_the_run(tmp_path):
    train(tmp_path, *ARGS, f"output_dir={tmp_path}", "name=run")
    run_dir = tmp_path / "run"
    [first] = sorted((tmp_path / "wandb_dir" / "wandb").glob("offline-run-*"))
    logged = offline_run(first)
    run_id = (run_dir / "wandb_run_id").read_text().strip()
    assert first.name.endswith(f"-{run_id}") and logged["id"] == run_id
    assert (logged["name"], logged["tags"], logged["group"]) == ("run", ["smoke", "search"], "arms")

    config = logged["config"]
    assert config["scaffold"] == "search" and config["trainer"]["steps"] == 2 and config["policy"]["model"] == "tiny"
    assert config["logging"]["wandb"] is True

    records = read_metrics(run_dir)
    assert [r["step"] for r in records] == [0, 1, 2]
    for record in records:  # every value of metrics.jsonl, at its step
        row = logged["history"][record["step"]]
        for key, value in record.items():
            if key not in ("step", "wall_s"):
                assert row[key] == pytest.approx(value, rel=1e-6, nan_ok=True), key
    assert "eval/success" in logged["history"][2] and "train/loss" in logged["history"][1]

    plots = {k: v for k, v in logged["history"][2].items() if k.startswith("plots/")}
    assert set(plots) == {"plots/reward", "plots/heldout_success"}
    for image in plots.values():
        assert image["format"] == "png" and (first / "files" / image["path"]).is_file()

    train(tmp_path, "--resume", str(run_dir), "trainer.steps=3")
    resumed = [p for p in (tmp_path / "wandb_dir" / "wandb").glob("offline-run-*") if p != first]
    assert len(resumed) == 1 and resumed[0].name.endswith(f"-{run_id}")
    continued = offline_run(resumed[0])
    assert continued["id"] == run_id  # `wandb sync` appends it to the same W&B run
    assert 3 in continued["history"] and not {0, 1, 2} & set(continued["history"])
    assert continued["history"][3]["reward/mean"] == pytest.approx(read_metrics(run_dir)[-1]["reward/mean"])
