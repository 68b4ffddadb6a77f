"""Scalar metrics of a run: `metrics.jsonl` in the run directory, mirrored to TensorBoard and, with
`logging.wandb=true`, to Weights & Biases (`wandb_sink.py`).

    with MetricsLogger("runs/demo") as metrics:
        metrics.log(1, {"reward/mean": 0.41, "success/mean": 0.41})

Each call appends one JSON line `{"step": 1, "wall_s": 12.5, "reward/mean": 0.41, ...}` and flushes it, so the
file is readable while the run is going and survives a kill. `wall_s` is training wall time: a logger opened on
an existing run directory continues from the largest `wall_s` already logged, so curves against wall time stay
continuous across `--resume`.

A killed run may have logged steps past its last checkpoint; the resumed run replays them. So the first `log`
of a resumed logger drops the records at or after its step (and TensorBoard hides their events), leaving one
record per step as if the run had never stopped. A truncated last line from a kill is cut when the file is
opened. Reading the file back (`read_metrics`, for plots, reports and the viewer) is `metrics_file.py`.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from agentrl.runlog.config import LoggingConfig
from agentrl.runlog.metrics_file import METRICS_FILE, Record, drop_partial_last_line, read_records, step_of
from agentrl.runlog.wandb_sink import WandbSink

if TYPE_CHECKING:
    from typing import Self

TENSORBOARD_DIR = "tensorboard"


class MetricsLogger:
    """Appends one JSON line per `log` call to `run_dir/metrics.jsonl`; optionally writes TensorBoard scalars and
    mirrors the run to W&B (`logging.wandb`, with `run_config` as the W&B run's config)."""

    def __init__(
        self,
        run_dir: str | Path,
        *,
        tensorboard: bool = True,
        logging: LoggingConfig | None = None,
        run_config: Any = None,
    ) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._wandb: WandbSink | None = None
        if logging is not None and logging.wandb and _is_main_process():
            self._wandb = WandbSink(self.run_dir, logging, config=run_config)
        self.path = self.run_dir / METRICS_FILE
        drop_partial_last_line(self.path)
        previous = read_records(self.path)
        self.resumed = bool(previous)
        self.wall_offset_s = max((float(r.get("wall_s", 0.0)) for r in previous), default=0.0)
        self._replay_pending = self.resumed
        self._started = time.monotonic()
        self._file = self.path.open("a", encoding="utf-8")
        self._tensorboard = tensorboard
        self._writer: Any = None

    @property
    def wall_s(self) -> float:
        """Training wall time so far: this logger's lifetime plus what earlier runs of this directory logged."""
        return self.wall_offset_s + time.monotonic() - self._started

    def log(self, step: int, metrics: Mapping[str, float | int | None]) -> None:
        """Append `{"step", "wall_s", **metrics}` (None values skipped) and flush it."""
        values = {k: _scalar(v) for k, v in metrics.items() if v is not None}
        record: Record = {"step": int(step), "wall_s": round(self.wall_s, 3), **values}
        if self._replay_pending:
            self._drop_records_from(int(step))
        # allow_nan: a diverged loss is worth recording as NaN rather than crashing the run over it.
        self._file.write(json.dumps(record, allow_nan=True) + "\n")
        self._file.flush()
        self._log_tensorboard(int(step), values)
        if self._wandb is not None:
            self._wandb.log(int(step), values)

    def close(self) -> None:
        """Close the file and the writers; the W&B run gets the run's plots and ends (failed when an exception is
        on its way out: `Trainer` closes from a `finally`)."""
        if not self._file.closed:
            self._file.close()
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._wandb is not None:
            sink, self._wandb = self._wandb, None
            sink.finish(failed=sys.exc_info()[0] is not None)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _drop_records_from(self, step: int) -> None:
        """Remove records at or after `step`, which this resumed run is about to log again."""
        self._replay_pending = False
        lines = self.path.read_text(encoding="utf-8").splitlines(keepends=True)
        kept = [line for line in lines if (logged := step_of(line)) is None or logged < step]
        if len(kept) == len(lines):
            return
        self._file.close()
        # Write then rename, so a kill during the rewrite leaves the old file rather than a half-written one.
        tmp = self.path.with_suffix(".jsonl.tmp")
        tmp.write_text("".join(kept), encoding="utf-8")
        os.replace(tmp, self.path)
        self._file = self.path.open("a", encoding="utf-8")

    def _log_tensorboard(self, step: int, values: Mapping[str, float | int]) -> None:
        writer = self._tensorboard_writer(step)
        if writer is None:
            return
        for name, value in values.items():
            writer.add_scalar(name, value, step)
        writer.flush()

    def _tensorboard_writer(self, first_step: int) -> Any:
        """The SummaryWriter, opened on first use (so a resumed run knows which step it replays from)."""
        if not self._tensorboard or self._writer is not None:
            return self._writer
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as e:
            warnings.warn(f"TensorBoard logging disabled: {e}", RuntimeWarning, stacklevel=3)
            self._tensorboard = False
            return None
        # purge_step hides events a killed run wrote for steps this resumed run is about to log again.
        purge_step = first_step if self.resumed else None
        self._writer = SummaryWriter(str(self.run_dir / TENSORBOARD_DIR), purge_step=purge_step)
        return self._writer


def _is_main_process() -> bool:
    """Whether this process logs for the run: one W&B run per run, however many processes train it."""
    return int(os.environ.get("RANK", "0")) == 0


def _scalar(value: Any) -> float | int:
    """A JSON-ready number; accepts numpy and 0-d torch scalars through their `__float__`."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    return float(value)
