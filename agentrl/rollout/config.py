"""`RolloutConfig`: how trajectories are collected (group size, turn and token budgets, branching, partial
rollouts)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RolloutConfig:
    """How trajectories are collected."""

    prompts_per_step: int = 16
    """Tasks sampled per training step."""
    samples_per_prompt: int = 8
    """Trajectories per task (the group size G of group-relative advantages)."""
    max_turns: int = 4
    """Policy turns per episode before it is cut off."""
    max_new_tokens_per_turn: int = 64
    """Tokens the policy may sample in one turn."""
    max_tokens_per_episode: int = 1024
    """Total tokens (prompt, sampled and tool output) an episode may reach."""
    max_parse_errors: int = 2
    """Consecutive malformed tool calls that end an episode."""
    temperature: float = 1.0
    """Sampling temperature for training rollouts."""
    top_p: float = 1.0
    """Nucleus sampling threshold for training rollouts."""
    max_concurrent_trajectories: int = 256
    """Trajectories in flight at once."""
    trajectory_timeout_s: float = 0.0
    """Wall-clock limit of one trajectory, branches included (each from when it gets a slot); one that runs over
    is cancelled, its tool session closed, and it counts as an infrastructure failure. With partial rollouts the
    clock stops while a carried trajectory is parked between steps. 0 = no limit."""
    max_tool_output_chars: int = 2000
    """Tool output longer than this is truncated (with a marker) before it reaches the policy."""
    branching: str = "none"
    """Branching rollouts: `none`, `arpo` or `aepo`. A rollout forks (tokens and tool session) after tool results
    with a probability that rises with its entropy; samples_per_prompt counts the forks (algorithms.md §3.1–3.2)."""
    branch_initial_rollouts: int = 0
    """Rollouts per task started from the prompt (m); forks fill the rest. 0 = half of samples_per_prompt."""
    branch_beam_size: int = 2
    """A rollout forks at most branch_beam_size − 1 times per tool round (b)."""
    branch_threshold: float = 0.5
    """Fork threshold τ on the noisy entropy score."""
    branch_entropy_weight: float = 0.2
    """Weight w of the entropy rise ΔH in the fork test."""
    branch_entropy_tokens: int = 20
    """Tokens after each tool result whose entropies are summed into ΔH."""
    branch_consecutive_penalty: float = 0.05
    """AEPO: the fork probability is scaled by max(0, 1 − penalty · consecutive branching rounds of the task)."""
    branch_dynamic_initial: bool = False
    """AEPO entropy pre-monitoring: set m per task from the entropies of its first rollout. That rollout is one of
    the task's trained trajectories and never forks; the task's other rollouts start when it has finished."""
    extra_groups_per_step: int = 0
    """Partial rollouts (APRIL): tasks started beyond prompts_per_step; a step ends once prompts_per_step groups
    are complete and the unfinished ones go on in the next step. 0 = off (every step waits for all its groups)."""
    max_staleness_steps: int = 1
    """Partial rollouts: a carried group started more than this many weight updates ago is dropped. Carried turns
    were sampled by older weights: set trainer.tis_cap (> 0) so the learner corrects for it."""

    @property
    def branch_rule(self) -> Any:
        """The `agentrl.rollout.branching.BranchRule` of these settings, or None without branching."""
        if self.branching == "none":
            return None
        from agentrl.rollout.branching import BranchRule

        m = self.branch_initial_rollouts or max(1, self.samples_per_prompt // 2)
        return BranchRule(
            mode=self.branching,
            rollouts_per_task=self.samples_per_prompt,
            initial_rollouts=m,
            beam_size=self.branch_beam_size,
            threshold=self.branch_threshold,
            entropy_weight=self.branch_entropy_weight,
            entropy_tokens=self.branch_entropy_tokens,
            consecutive_penalty=self.branch_consecutive_penalty,
            dynamic_initial=self.branch_dynamic_initial,
        )

    @property
    def trajectories_per_step(self) -> int:
        return self.prompts_per_step * self.samples_per_prompt
