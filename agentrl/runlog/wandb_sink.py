"""`WandbSink`: a run's metrics, config and plots mirrored to Weights & Biases (`logging.wandb=true`).

    sink = WandbSink(run_dir, LoggingConfig(wandb=True), config=run_config)
    sink.log(1, {"reward/mean": 0.41})
    sink.finish()                                  # draws the run's plots, logs them, closes the W&B run

The W&B run id is kept in the run directory (`wandb_run_id`), so `agentrl train --resume RUN_DIR` continues the
same W&B run rather than starting a new one. W&B keeps one value per step and ignores steps below the last it
has: the steps a resumed run replays (those a killed run logged past its last checkpoint) keep the values of the
first attempt there, while `metrics.jsonl` holds the replayed ones.

wandb writes its files under $WANDB_DIR when that is set, else under the run directory (`RUN_DIR/wandb/`).
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import string
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentrl.config_io import to_dict
from agentrl.errors import ConfigError, DependencyError, InfraError
from agentrl.runlog.config import LoggingConfig

RUN_ID_FILE = "wandb_run_id"
DEFAULT_PROJECT = "agentrl"
INSTALL_HINT = "logging.wandb=true needs wandb: pip install 'agentrl[wandb]'"


def import_wandb() -> Any:
    """The wandb module, or a `DependencyError` saying how to install it."""
    try:
        import wandb
    except ImportError:
        raise DependencyError(INSTALL_HINT) from None
    return wandb


class WandbSink:
    """One W&B run per run directory: `log` per step, `finish` at the end (with the run's plots)."""

    def __init__(self, run_dir: str | Path, settings: LoggingConfig, *, config: Any = None) -> None:
        wandb = import_wandb()
        self.run_dir = Path(run_dir)
        self.last_step: int | None = None
        try:
            self.run = wandb.init(
                project=settings.wandb_project or os.environ.get("WANDB_PROJECT") or DEFAULT_PROJECT,
                entity=settings.wandb_entity,
                name=settings.wandb_run_name or self.run_dir.resolve().name,
                group=settings.wandb_group,
                tags=list(settings.wandb_tags) or None,
                mode=settings.wandb_mode,
                dir=os.environ.get("WANDB_DIR") or str(self.run_dir),
                id=run_id(self.run_dir),
                # "allow": the first run of a directory creates the W&B run, a resumed one continues it
                resume="allow",
                config=_config_dict(config),
            )
        except (wandb.errors.UsageError, wandb.errors.AuthenticationError) as e:  # no or a bad API key, a bad setting
            raise ConfigError(f"W&B could not start the run: {e} (or set logging.wandb_mode=offline)") from None
        except wandb.errors.CommError as e:
            raise InfraError(f"W&B could not start the run: {e} (or set logging.wandb_mode=offline)") from None

    def log(self, step: int, values: Mapping[str, float | int]) -> None:
        """Log one step's scalars at `step` (W&B's x axis is the training step, as in `metrics.jsonl`)."""
        self.run.log(dict(values), step=step)
        self.last_step = step if self.last_step is None else max(self.last_step, step)

    def log_plots(self, paths: list[Path]) -> None:
        """Log PNG plots as `plots/<name>` images at the last logged step."""
        if not paths or self.last_step is None:
            return
        wandb = import_wandb()
        self.run.log({f"plots/{p.stem}": wandb.Image(str(p)) for p in paths}, step=self.last_step)

    def finish(self, *, failed: bool = False) -> None:
        """Draw the run's plots (`runlog/plots.py`; the command line draws the same ones when the run ends), log
        them, and close the W&B run; `failed` marks it so."""
        from agentrl.runlog.plots import plot_run

        try:
            if self.last_step is not None:
                self.log_plots(plot_run(self.run_dir))
        finally:
            self.run.finish(exit_code=1 if failed else 0)


def run_id(run_dir: Path) -> str:
    """The W&B run id of this run directory: the stored one, or a new one stored for the runs that resume it."""
    path = run_dir / RUN_ID_FILE
    if path.is_file() and (stored := path.read_text().strip()):
        return stored
    alphabet = string.ascii_lowercase + string.digits
    new = "".join(secrets.choice(alphabet) for _ in range(8))
    path.write_text(new + "\n")
    return new


def _config_dict(config: Any) -> dict[str, Any] | None:
    """The run config as nested plain data (what W&B shows and filters by)."""
    if config is None:
        return None
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return to_dict(config)
    return dict(config)
