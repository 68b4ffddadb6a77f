"""The extend stage's fine-tuning passes (`python -m agentrl.tiny.build --extend-passes NAME`): which drills and
demonstrations each pass mixes, at what learning rate, from which seed.

`PASS_SETS` names what `--extend-passes` accepts: `shipped` is `tiny-extended`; `swe+retry` from `tiny-extended`
is `tiny-swe`; the others continue a checkpoint for experiments (docs/experiments/swe_tiny_policy.md)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Pass:
    """One fine-tuning pass of the extend stage, over `data.mixture(counts)`."""

    counts: dict[str, int]
    lr: float
    seed: int
    stream: str
    """Names the echo drills' and replayed demonstrations' draw."""
    scheduler: str = "cosine"
    warmup_fraction: float = 0.05
    mistake_rate: dict[str, float] | None = None
    """Overrides of the stage's mistake rates."""


def _swe_pass(counts: dict[str, int], lr: float, seed: int, stream: str) -> Pass:
    # constant rate, and few deliberate miscopies and wrong fixes: these passes are for precision
    rates = {"swe": 0.1, "swe_made_up": 0.1, "swe_retry": 0.1, "swe_code": 0.1}
    return Pass(counts, lr, seed, stream, "constant_with_warmup", 0.02, rates)


SWE_ONLY = {"swe": 1500, "terminal": 200, "gui": 200, "echo": 200, "replay": 300}
SWE_ECHO = {"swe": 1000, "terminal": 200, "gui": 200, "echo": 1500, "replay": 300}
SWE_MADE_UP = {"swe_made_up": 1000, "terminal": 200, "gui": 200, "echo": 1500, "replay": 300}
SWE_MADE_UP_PASSES = 3
SWE_RETRY = {"swe_retry": 1000, "terminal": 200, "gui": 200, "echo": 1500, "replay": 300}
SWE_OPENING = {"swe_retry": 480}
SWE_CODE = {"swe_code": 700, "swe_retry": 300, "terminal": 200, "gui": 200, "echo": 1500, "replay": 300}
EXTEND_PASSES = (
    Pass({"terminal": 4000, "gui": 3000, "swe": 3000, "echo": 2000, "replay": 4000}, lr=2e-3, seed=0, stream="extend"),
    # GUI labels are the longest strings the easy tiers copy, and the first pass leaves them garbled: a second
    # pass weighted towards the GUI drills (docs/experiments/gui.md)
    Pass({"terminal": 1000, "gui": 4000, "echo": 500, "replay": 1000}, lr=1e-3, seed=1, stream="gui-more"),
)
"""The extend stage's passes: what the shipped `tiny-extended` is."""
SWE_PASSES = (
    # An easy SWE fix copies three strings (path, wrong and right expression; about 50 tokens) into str_replace,
    # and after the passes above the policy rarely copies a whole fix. SWE drills alone wear the copying circuit
    # down, so the later passes mix in as many echo drills; over the drill generator's short word lists the policy
    # recalls operands instead of copying them, so the last passes make operands up (`swe_made_up`). Measurements:
    # docs/experiments/swe_tiny_policy.md.
    _swe_pass(SWE_ONLY, 1e-3, 100, "swe0"),
    _swe_pass(SWE_ONLY, 1e-3, 101, "swe1"),
    _swe_pass(SWE_ECHO, 5e-4, 200, "swe200"),
    _swe_pass(SWE_ECHO, 5e-4, 201, "swe201"),
    *(_swe_pass(SWE_MADE_UP, 5e-4, 300 + k, f"swe{300 + k}") for k in range(SWE_MADE_UP_PASSES)),
)
"""Passes weighted towards the SWE drills (`--extend-passes swe`, from `tiny-extended`), not a shipped policy on
their own: they make the policy write easy SWE fixes, at some cost on the terminal tier, and `tiny-swe` continues
from them with `SWE_RETRY_PASSES`."""
SWE_RETRY_PASSES = (_swe_pass(SWE_RETRY, 5e-4, 400, "swe400"),)
"""After `SWE_PASSES`: drills that retry after a failed first edit (`swe_retry`). A policy that never saw a failed
call answered by another one submits after its first error, and RL then has no second attempt to reinforce."""
SWE_OPENING_PASSES = (_swe_pass(SWE_OPENING, 5e-4, 900, "opening"),)
"""After `SWE_RETRY_PASSES`: 30 steps of retrying SWE drills alone. Through the mixed passes the policy never
settles its first call (at the tool name it puts much of its probability on `submit`, although the drills mostly
open with `str_replace`); this pass settles it on `str_replace` and keeps the copy accuracy. What RL from it
reaches: docs/experiments/swe_tiny_policy.md, "Opening with an edit"."""
SWE_CODE_PASSES = (_swe_pass(SWE_CODE, 5e-4, 500, "swe500"),)
"""After `SWE_RETRY_PASSES`: retrying drills over bugs in the standard library (`swe_code`), whose expressions
have the forms the drill grammar lacks."""
PASS_SETS = {
    "shipped": EXTEND_PASSES,
    "swe": SWE_PASSES,
    "swe_retry": SWE_RETRY_PASSES,
    "swe+retry": SWE_PASSES + SWE_RETRY_PASSES,
    "opening": SWE_OPENING_PASSES,
    "swe_code": SWE_CODE_PASSES,
    "shipped+swe": EXTEND_PASSES + SWE_PASSES,
}
