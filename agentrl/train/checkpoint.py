"""Resumable checkpoints in the run directory.

`checkpoints/step_000010/` holds `weights.safetensors` (every trainable parameter: the whole model, or only the
LoRA adapters; the learner's fp32 master weights, so a bf16 run resumes exactly), `learner.pt` (optimizer state
and RNG states), `trainer_state.json` (step counters),
`carried_groups.json` (the partial-rollout groups carried into the next step, as tasks to re-issue: see
`agentrl/rollout/partial.py`), and `policy/` (a `save_pretrained` export that `agentrl eval --model` and
`agentrl serve --model` load directly and `agentrl push` uploads, with a model card as its `README.md`: see
`model_card.py`).
A checkpoint is written to a temporary directory and renamed into place, so a run killed mid-save never leaves a
half-written checkpoint that `--resume` would pick up.
"""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from agentrl.train.model_card import write_run_model_card


@dataclass(frozen=True)
class TrainerState:
    """Counters that make a resumed run continue as if never stopped."""

    step: int
    """Steps completed."""
    wall_s: float
    """Training wall time so far, in seconds."""
    policy_version: int


CARRIED_FILE = "carried_groups.json"


def checkpoint_dir(run_dir: Path, step: int) -> Path:
    return run_dir / "checkpoints" / f"step_{step:06d}"


def save_checkpoint(
    run_dir: Path,
    state: TrainerState,
    model: Any,
    tokenizer: Any,
    learner: Any,
    *,
    keep: int = 2,
    carried: Sequence[Mapping[str, Any]] = (),
    learner_state: Mapping[str, Any] | None = None,
) -> Path:
    """Write the checkpoint of `state.step`; `carried` is `PartialRollouts.carry_state()` (empty without partial
    rollouts); `learner_state` is `learner.state_dict()` when the caller took it already (with
    `trainer.sharding = fsdp` a collective that every rank joins, so it cannot be taken here, on rank 0 alone).
    Only the newest `keep` checkpoints are kept."""
    from safetensors.torch import save_file

    final = checkpoint_dir(run_dir, state.step)
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    if learner_state is None:
        learner_state = learner.state_dict()
    learner_state = dict(learner_state)
    trainable = learner_state.pop("weights", None) or {
        n: p.detach() for n, p in model.named_parameters() if p.requires_grad
    }
    save_file({n: w.cpu().contiguous() for n, w in trainable.items()}, tmp / "weights.safetensors")
    torch.save(
        {"learner": learner_state, "torch_rng": torch.get_rng_state(), "python_rng": random.getstate()},
        tmp / "learner.pt",
    )
    (tmp / "trainer_state.json").write_text(json.dumps(state.__dict__, indent=2))
    (tmp / CARRIED_FILE).write_text(json.dumps([dict(entry) for entry in carried], indent=2))
    model.save_pretrained(tmp / "policy")
    tokenizer.save_pretrained(tmp / "policy")
    write_run_model_card(tmp / "policy", run_dir, state.step)
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    _prune(run_dir / "checkpoints", keep)
    return final


def latest_checkpoint(run_dir: Path) -> Path | None:
    root = run_dir / "checkpoints"
    if not root.is_dir():
        return None
    done = sorted(p for p in root.glob("step_*") if p.is_dir() and not p.name.endswith(".tmp"))
    return done[-1] if done else None


def load_checkpoint(path: Path, model: Any, learner: Any) -> TrainerState:
    """Restore weights (the model's parameters in their dtype, the learner's masters in fp32), optimizer and RNG
    states in place; return the counters."""
    from safetensors.torch import load_file

    weights = load_file(path / "weights.safetensors", device=str(next(model.parameters()).device))
    _, unexpected = model.load_state_dict(weights, strict=False)
    if unexpected:
        raise RuntimeError(f"checkpoint {path} has weights the model lacks: {unexpected[:5]}")
    untrained = [n for n, p in model.named_parameters() if p.requires_grad and n not in weights]
    if untrained:
        raise RuntimeError(f"checkpoint {path} lacks trainable weights: {untrained[:5]}")
    blob = torch.load(path / "learner.pt", weights_only=False)
    learner.load_state_dict({**blob["learner"], "weights": weights})
    torch.set_rng_state(blob["torch_rng"])
    random.setstate(blob["python_rng"])
    return TrainerState(**json.loads((path / "trainer_state.json").read_text()))


def load_carried(path: Path) -> list[dict[str, Any]]:
    """The carried partial-rollout groups of the checkpoint at `path` (none in one written before they were
    saved)."""
    file = path / CARRIED_FILE
    return json.loads(file.read_text()) if file.exists() else []


def _prune(root: Path, keep: int) -> None:
    done = sorted(p for p in root.glob("step_*") if p.is_dir() and not p.name.endswith(".tmp"))
    for old in done[: max(0, len(done) - keep)]:
        shutil.rmtree(old, ignore_errors=True)
