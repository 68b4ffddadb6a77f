"""The learning-rate schedule (`trainer.lr_schedule`, `warmup_steps`, `min_lr_ratio`), counted in optimizer steps.

A pure function of the optimizer step rather than a `torch.optim.lr_scheduler` object: the learner's only schedule
state is then its count of optimizer steps, which it checkpoints, and a run resumed with a different
`trainer.steps` simply follows the schedule of the new length.
"""

from __future__ import annotations

import math

from agentrl.errors import ConfigError

LR_SCHEDULES = ("constant", "cosine")


def check_schedule(schedule: str, warmup_steps: int, min_lr_ratio: float) -> None:
    """Raise `ConfigError` for a schedule `learning_rate` cannot follow."""
    if schedule not in LR_SCHEDULES:
        raise ConfigError(f"unknown trainer.lr_schedule {schedule!r}; known: {', '.join(LR_SCHEDULES)}")
    if warmup_steps < 0:
        raise ConfigError(f"trainer.warmup_steps must be ≥ 0, got {warmup_steps}")
    if not 0.0 <= min_lr_ratio <= 1.0:
        raise ConfigError(f"trainer.min_lr_ratio must be within [0, 1], got {min_lr_ratio}")


def learning_rate(
    optimizer_step: int,
    *,
    peak_lr: float,
    total_steps: int,
    schedule: str = "constant",
    warmup_steps: int = 0,
    min_lr_ratio: float = 0.0,
) -> float:
    """The learning rate of optimizer step `optimizer_step` (1 = the first step) out of `total_steps`.

    Warm-up rises linearly from 0: step k ≤ `warmup_steps` takes peak_lr · k / warmup_steps, so the first step
    already moves and step `warmup_steps` takes the peak. After it, `constant` stays at the peak and `cosine` falls
    from the peak to min_lr_ratio · peak_lr at step `total_steps` (and stays there beyond it).
    """
    if warmup_steps > 0 and optimizer_step <= warmup_steps:
        return peak_lr * max(optimizer_step, 0) / warmup_steps
    if schedule == "constant":
        return peak_lr
    span = total_steps - warmup_steps
    progress = min(1.0, (optimizer_step - warmup_steps) / span) if span > 0 else 1.0
    return peak_lr * (min_lr_ratio + (1.0 - min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress)))
