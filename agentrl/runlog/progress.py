"""Training progress on the console: a live rich bar in a terminal, one compact line per step elsewhere.

    with TrainProgress(60, start_step=resumed_step) as progress:
        progress.advance(step, {"reward/mean": 0.41, "success/mean": 0.41, "tool_calls/mean": 1.6})
        progress.log("evaluating")

The bar shows step i/N, elapsed time, ETA and the latest reward, success, tool calls per trajectory, rollout
tokens per second and held-out success. When the bar is disabled, or stdout is not a terminal (CI logs, files,
pipes, where a redrawn bar turns into noise), each step prints one line instead:

    step 3/60 reward 0.41 success 0.41 tools 1.6 tok/s 2311 eval 0.52

While a step's rollouts run, the bar has a second row, `rollouts 37/64 failed 1 running 12`, fed by the rollout
engine itself: `progress.rollouts` is a `RolloutProgress` that the engine tells how many trajectories it
schedules (`expect`) and hands each trajectory once as it ends (`done`; failures and timeouts included). Without
a live bar the counts are kept but nothing is printed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing import Self

# (metrics key, label, format) in display order; a key missing from a step's metrics is left out.
FIELDS: tuple[tuple[str, str, str], ...] = (
    ("reward/mean", "reward", "{:.2f}"),
    ("success/mean", "success", "{:.2f}"),
    ("tool_calls/mean", "tools", "{:.1f}"),
    ("rollout/tokens_per_s", "tok/s", "{:.0f}"),
)
EVAL_KEY = "eval/success"
FAILED_KEY = "reward/failed"
"""Rewards that failed entirely this step (every request failed): the line says `reward FAILED`."""


class RolloutProgress:
    """One step's trajectories as the rollout engine reports them; `with rollouts:` around a step's collection
    starts from zero. `listener` is called after every change (the live bar redraws from it)."""

    def __init__(self, listener: Callable[[RolloutProgress], None] | None = None) -> None:
        self.listener = listener
        self.active = False
        self.total = self.finished = self.failed = 0
        self.running: Callable[[], int] | None = None
        """Trajectories in flight now, when the engine offers a count (its slots)."""

    def __enter__(self) -> Self:
        self.total = self.finished = self.failed = 0
        self.running = None
        self.active = True
        self._changed()
        return self

    def __exit__(self, *exc: object) -> None:
        self.active = False
        self._changed()

    def expect(self, trajectories: int, in_flight: Callable[[], int] | None = None) -> None:
        """The engine scheduled this many more trajectories; `in_flight` counts those it is running now."""
        self.total += trajectories
        if in_flight is not None:
            self.running = in_flight
        self._changed()

    def done(self, trajectory: Any) -> None:
        """One trajectory ended (answered, cut off, failed or timed out); the engine calls this once per trajectory."""
        self.finished += 1
        self.failed += bool(getattr(trajectory, "is_infra_failure", False))
        self._changed()

    def describe(self) -> str:
        """`failed 1 running 12`: what the bar's columns do not already show (`str()` gives the same, so the bar,
        which formats this object at every refresh, shows the running count as it is then)."""
        parts = [f"failed {self.failed}"] if self.failed else []
        if self.running is not None:
            parts.append(f"running {self.running()}")
        return " ".join(parts)

    def __str__(self) -> str:
        return self.describe()

    def _changed(self) -> None:
        if self.listener is not None:
            self.listener(self)


class TrainProgress:
    """Context manager reporting training progress; see the module docstring for the two display modes."""

    def __init__(self, total_steps: int, *, enabled: bool = True, start_step: int = 0, console: Any = None) -> None:
        """`console` is a `rich.console.Console` to draw on (default: stdout); it decides what a terminal is."""
        self.total_steps = total_steps
        self.start_step = start_step
        self.step = start_step
        self.eval_success: float | None = None
        self._enabled = enabled
        self._console = console
        self._progress: Any = None
        self._task: Any = None
        self._rollout_task: Any = None
        self.rollouts = RolloutProgress(self._show_rollouts)
        """Handed to the rollout engine during each step's collection."""

    @property
    def live(self) -> bool:
        """Whether a live bar is being drawn (otherwise steps print as lines)."""
        return self._progress is not None

    def __enter__(self) -> Self:
        if self._enabled:
            console = self._console or _stdout_console()
            if console.is_terminal:
                self._start_bar(console)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def advance(self, step: int, metrics: Mapping[str, float]) -> None:
        """Record that `step` finished with `metrics` (any of the displayed keys may be missing)."""
        self.step = step
        if _is_number(metrics.get(EVAL_KEY)):
            self.eval_success = float(metrics[EVAL_KEY])
        text = self.describe(metrics)
        if self._progress is not None:
            self._progress.update(self._task, completed=step, stats=text)
        else:
            print(f"step {step}/{self.total_steps} {text}".rstrip(), flush=True)

    def log(self, message: str) -> None:
        """Print `message` on its own line (above the bar when one is drawn)."""
        if self._progress is not None:
            self._progress.console.print(message, markup=False, highlight=False)
        else:
            print(message, flush=True)

    def describe(self, metrics: Mapping[str, float]) -> str:
        """`reward 0.41 success 0.41 tools 1.6 tok/s 2311 eval 0.52` for the keys present."""
        parts = [
            f"{label} {fmt.format(float(metrics[key]))}" for key, label, fmt in FIELDS if _is_number(metrics.get(key))
        ]
        if _is_number(metrics.get(FAILED_KEY)) and metrics[FAILED_KEY]:  # a reward scored nothing: no 0.00 to read
            parts = ["reward FAILED" if part.startswith("reward ") else part for part in parts]
        # Held-out success is only measured every few steps; the latest known value stays on display.
        if self.eval_success is not None:
            parts.append(f"eval {self.eval_success:.2f}")
        return " ".join(parts)

    def _show_rollouts(self, rollouts: RolloutProgress) -> None:
        if self._progress is None:
            return
        if not rollouts.active:
            if self._rollout_task is not None:
                self._progress.remove_task(self._rollout_task)
                self._rollout_task = None
            return
        if self._rollout_task is None:
            self._rollout_task = self._progress.add_task("rollouts", total=None, stats=rollouts)
        self._progress.update(self._rollout_task, total=rollouts.total or None, completed=rollouts.finished)

    def _start_bar(self, console: Any) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[stats]}", markup=False),
            console=console,
        )
        self._task = self._progress.add_task("train", total=self.total_steps, completed=self.start_step, stats="")
        self._progress.start()


def _stdout_console() -> Any:
    from rich.console import Console

    return Console()


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
