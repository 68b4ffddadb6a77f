"""What an update did with each turn, for the run's trajectory log (`trajectories/step_*.jsonl`).

`TurnCredit.of(samples, learner_logprobs)` pairs every trained trajectory with its `TrainSample` and the learner's
log-probs of it (`Learner.last_logprobs`); `turn_fields` then reads, for each turn, what the trajectory writer
records beside it:

- `advantage`: the advantage credit assignment gave the turn's sampled tokens (None when the trajectory was not
  in the update: an infrastructure failure, an unscored trajectory, a group without signal);
- `trained`: whether those tokens were in the loss (a shared turn's copy under hard branch attribution is not);
- `learner_logprobs`: the learner's log-prob of each sampled token under the weights that sampled it, aligned
  with `logprobs` (the sampler's), so a reader sees the sampler–learner gap token by token; None where the
  learner did not score the trajectory on this process.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentrl.types import Trajectory

if TYPE_CHECKING:
    from agentrl.train.samples import TrainSample


@dataclass(frozen=True)
class TurnCredit:
    """The samples of one update by trajectory id, with the learner's log-probs of each (as lists)."""

    samples: Mapping[str, TrainSample] = field(default_factory=dict)
    logprobs: Mapping[str, list[float]] = field(default_factory=dict)

    @classmethod
    def of(cls, samples: Sequence[TrainSample], learner_logprobs: Mapping[int, Any] | None = None) -> TurnCredit:
        """`learner_logprobs` maps an index into `samples` to its `logprobs_T1` tensor (moved to the host at once)."""
        by_id = {s.trajectory_id: s for s in samples if s.trajectory_id is not None}
        logprobs: dict[str, list[float]] = {}
        if learner_logprobs:
            import torch

            indices = [i for i in sorted(learner_logprobs) if samples[i].trajectory_id is not None]
            rows = [learner_logprobs[i].detach().float() for i in indices]
            flat = torch.cat(rows).cpu().tolist() if rows else []  # one device-to-host copy for the whole step
            start = 0
            for i, row in zip(indices, rows, strict=True):
                logprobs[samples[i].trajectory_id] = flat[start : start + len(row)]  # type: ignore[index]
                start += len(row)
        return cls(by_id, logprobs)

    def turn_fields(self, trajectory: Trajectory) -> list[dict[str, Any]]:
        """One dict per turn: `advantage`, `trained`, `learner_logprobs` (see the module docstring)."""
        sample = self.samples.get(trajectory.trajectory_id)
        logprobs = self.logprobs.get(trajectory.trajectory_id)
        fields: list[dict[str, Any]] = []
        position = len(trajectory.prompt_ids)
        for turn in trajectory.turns:
            n = len(turn.completion_ids)
            advantage, trained, learned = None, False, None
            if sample is not None and n:
                advantage, trained = round(sample.advantages[position], 5), bool(sample.loss_mask[position])
            if logprobs is not None and n:
                learned = [round(x, 5) for x in logprobs[position - 1 : position - 1 + n]]  # row t scores token t+1
            fields.append({"advantage": advantage, "trained": trained, "learner_logprobs": learned})
            position += n + len(turn.observation_ids)
        return fields
