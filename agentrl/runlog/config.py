"""`LoggingConfig`: where a run's metrics go besides `metrics.jsonl` (Weights & Biases)."""

from __future__ import annotations

from dataclasses import dataclass

from agentrl.errors import ConfigError

WANDB_MODES = ("online", "offline", "disabled")


@dataclass(frozen=True)
class LoggingConfig:
    """Experiment trackers a run mirrors its metrics to (`metrics.jsonl` is always written)."""

    wandb: bool = False
    """Mirror metrics, the run config and the plots to Weights & Biases (`pip install 'agentrl[wandb]'`)."""
    wandb_project: str | None = None
    """W&B project; None = $WANDB_PROJECT, else `agentrl`."""
    wandb_entity: str | None = None
    """W&B entity (user or team); None = $WANDB_ENTITY, else your default entity."""
    wandb_run_name: str | None = None
    """Display name of the W&B run; None = the run name (the run directory's name)."""
    wandb_group: str | None = None
    """W&B group that collects related runs (the arms of a comparison, say)."""
    wandb_tags: tuple[str, ...] = ()
    """W&B tags of the run."""
    wandb_mode: str | None = None
    """`online`, `offline` (write locally, upload later with `wandb sync`) or `disabled`; None = $WANDB_MODE, else
    wandb's own default."""

    def __post_init__(self) -> None:
        if self.wandb_mode is not None and self.wandb_mode not in WANDB_MODES:
            modes = ", ".join(WANDB_MODES)
            raise ConfigError(f"logging.wandb_mode must be one of {modes} (or unset), not {self.wandb_mode!r}")
