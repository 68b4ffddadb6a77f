"""Where a new run lives: `<output_dir>/<name>`, created once and never shared by two runs."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from agentrl.errors import ConfigError


def new_run_dir(config: Any, *, resume: bool = False) -> Path:
    """`<output_dir>/<name>` (a timestamp when unnamed), created; refuses a directory that already holds a run
    unless resuming it."""
    run_dir = Path(config.output_dir) / (config.name or time.strftime("%Y%m%d-%H%M%S"))
    if not resume and (run_dir / "checkpoints").exists():
        raise ConfigError(f"{run_dir} already holds a run; use --resume {run_dir} or another --name")
    run_dir.mkdir(parents=True, exist_ok=True)
    return run_dir
