"""Where a new run lives: `<output_dir>/<name>`, never shared by two runs, and made only by a run that starts."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from agentrl.errors import ConfigError


def new_run_dir(config: Any, *, resume: bool = False) -> Path:
    """`<output_dir>/<name>` (a timestamp when unnamed); refuses a directory that already holds a run unless
    resuming it. It is named here and made by the run's logs (`MetricsLogger`), once every check before the run
    has passed: a run that cannot start leaves no empty directory behind."""
    run_dir = Path(config.output_dir) / (config.name or time.strftime("%Y%m%d-%H%M%S"))
    if not resume and (run_dir / "checkpoints").exists():
        raise ConfigError(f"{run_dir} already holds a run; use --resume {run_dir} or another --name")
    return run_dir
