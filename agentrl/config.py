"""Run configuration: frozen dataclasses mapped 1:1 to the command line.

`agentrl train -c run.toml trainer.lr=1e-5 rollout.samples_per_prompt=4` builds a `RunConfig` from the
defaults below, then the TOML file, then the dotted overrides, in that order. Each field's attribute docstring
is its help text (`agentrl train --help-config`). Quantities carry their unit in their name; totals are derived
properties, checked once in `__post_init__`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentrl.config_io import ConfigError, dump_toml, field_docs, from_dict, load_dataclass, to_dict
from agentrl.toolserver.config import ToolServerConfig

__all__ = [
    "ConfigError",
    "EvalConfig",
    "EvalRunConfig",
    "PolicyConfig",
    "RolloutConfig",
    "RunConfig",
    "TrainerConfig",
    "dump_toml",
    "field_docs",
    "from_dict",
    "load_config",
    "to_dict",
]


@dataclass(frozen=True)
class PolicyConfig:
    """The model being trained (or evaluated) and how it samples."""

    model: str = "tiny"
    """Model to train: `tiny` (the shipped tiny policy: code, search), `tiny-extended` (its stage trained on the
    easy tiers of terminal, GUI and SWE too), `tiny-swe` (that stage trained further on SWE drills), a local
    checkpoint path, or a hub id already cached."""
    backend: str = "transformers"
    """Sampler backend: `transformers` (in-process), `vllm` (an in-process vLLM engine on the GPU, weights synced
    from the learner each step; the `vllm` extra) or `openai` (an OpenAI-compatible completions server)."""
    base_url: str | None = None
    """Base URL of the OpenAI-compatible server for the `openai` backend."""
    api_key: str | None = None
    """API key for the `openai` backend (defaults to $OPENAI_API_KEY, then `EMPTY`)."""
    device: str = "auto"
    """Torch device for the in-process model: `auto`, `cpu`, `cuda`, `cuda:1`, ..."""
    dtype: str = "auto"
    """Weights dtype: `auto` (float32 on CPU, bfloat16 on GPU), `float32`, `bfloat16`, `float16`."""
    max_batch_size: int = 128
    """Most generation requests the in-process sampler batches into one forward pass."""
    batch_wait_ms: float = 2.0
    """How long the sampler waits for more requests before starting a batch."""
    lora_rank: int = 0
    """LoRA rank (peft); 0 trains all parameters."""
    lora_alpha: int = 32
    """LoRA alpha."""
    lora_target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    """Modules LoRA adapts."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass to save memory."""


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
    """AEPO entropy pre-monitoring: set m per task from the entropies of its first rollout (which never forks)."""
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


@dataclass(frozen=True)
class TrainerConfig:
    """The learner: advantages, loss and optimisation."""

    steps: int = 100
    """Training steps (one collect → update cycle each)."""
    max_minutes: float | None = None
    """Stop after this much wall time (checked between steps); None = no limit."""
    lr: float = 2e-4
    """AdamW learning rate."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    betas: tuple[float, float] = (0.9, 0.99)
    """AdamW betas."""
    max_grad_norm: float = 1.0
    """Gradient clipping threshold (global L2 norm)."""
    advantage: str = "grpo"
    """Advantage estimator, by registry name or dotted path: `grpo`, `dr_grpo`, `rloo`, `lite_ppo`, `mc_grpo`
    (median baseline, pivot left out of the loss) or `ngrpo` (virtual r_max sample)."""
    loss: str = "ppo_clip"
    """Policy loss, by registry name or dotted path: `ppo_clip`, `aepo` (gradient-keeping upper clip) or `gspo`
    (sequence-level ratio)."""
    loss_agg: str = "token-mean"
    """Loss aggregation: `token-mean`, `seq-mean-token-mean` or `seq-mean-token-sum-norm`."""
    clip_low: float = 0.2
    """Lower PPO clip range ε_low."""
    clip_high: float = 0.28
    """Upper PPO clip range ε_high (clip-higher, DAPO)."""
    dual_clip: float = 3.0
    """Dual-clip constant c bounding the loss of negative-advantage tokens; 0 disables."""
    kl_coef: float = 0.0
    """Coefficient of the k3 KL penalty to the reference (initial) policy; 0 loads no reference."""
    entropy_coef: float = 0.0
    """Coefficient of the entropy bonus."""
    max_tokens_per_microbatch: int = 16384
    """Padded tokens per forward/backward micro-batch (gradients accumulate across micro-batches)."""
    minibatches_per_step: int = 1
    """Optimizer steps per training step (the batch is split into this many mini-batches)."""
    skip_zero_advantage_groups: bool = True
    """Leave groups whose advantages are all zero out of the update (they carry no gradient)."""
    credit: str = "trajectory"
    """Credit assignment, by name or dotted path: `trajectory` (one `advantage` per trajectory), `igpo`
    (turn-level), `gigpo` or `hgpo` (anchor-state step groups)."""
    igpo_gamma: float = 1.0
    """IGPO discount γ over turns: a turn's advantage is its normalised reward plus γ × the next turn's."""
    igpo_norm: str = "joint"
    """IGPO reward normalisation pool: `joint`, `separate` (outcomes apart) or `per_turn_index`."""
    step_advantage_weight: float = 1.0
    """GiGPO/HGPO ω: weight of the step advantage added to the episode advantage."""
    step_gamma: float = 0.95
    """GiGPO/HGPO discount γ of the step returns."""
    step_std_norm: bool = False
    """GiGPO/HGPO: divide episode and step advantages by their group std (`mean_std_norm`)."""
    anchor_match_threshold: float = 1.0
    """GiGPO/HGPO: observations match when identical (1.0) or when their difflib ratio is ≥ this (e.g. 0.95)."""
    hgpo_history_turns: int = 2
    """HGPO K: history levels (previous observations) used to refine step groups."""
    hgpo_alpha: float = 1.0
    """HGPO level weight exponent α: level l weighs (l + 1)^α."""
    branch_attribution: str = "soft"
    """Credit of turns a forked trajectory shares with its parent: `soft` (each copy keeps its own advantage,
    as ARPO ships) or `hard` (every copy gets the mean over the trajectories sharing it)."""
    entropy_advantage_alpha: float | None = None
    """AEPO entropy-aware advantage A·(1 + α·z(H)); None = 0.2 with `loss = aepo`, else 0 (off)."""
    tis_cap: float = 0.0
    """Truncated importance sampling: weight each token's policy loss by min(π_old / π_sampler, cap); 0 = off."""

    @property
    def entropy_alpha(self) -> float:
        """The effective α of the entropy-aware advantage."""
        if self.entropy_advantage_alpha is not None:
            return self.entropy_advantage_alpha
        return 0.2 if self.loss == "aepo" else 0.0


@dataclass(frozen=True)
class EvalConfig:
    """Held-out evaluation during training."""

    every_steps: int = 5
    """Evaluate every this many steps (and before the first and after the last); 0 disables."""
    max_tasks: int = 96
    """Held-out tasks evaluated (taken in order from the scaffold's `test` split)."""
    samples_per_task: int = 1
    """Samples per held-out task."""
    temperature: float = 1.0
    """Sampling temperature for evaluation; 0 = greedy."""


@dataclass(frozen=True)
class EvalRunConfig:
    """`agentrl eval`: one scaffold's tasks against an endpoint or a local checkpoint."""

    scaffold: str = "code"
    """Scaffold by registry name or dotted path (its tasks, tools, system prompt and rewards)."""
    model: str = "tiny"
    """Model name at the endpoint (`provider/model` goes through litellm), or `tiny` / `tiny-extended` /
    `tiny-swe` / a checkpoint path."""
    base_url: str | None = None
    """OpenAI-compatible base URL (`http://host:port/v1`); None evaluates a local checkpoint in-process."""
    api_key: str | None = None
    """API key (defaults to $OPENAI_API_KEY, then `EMPTY`)."""
    format: str = "auto"
    """`text`: the scaffold's token-level loop (in-process, or token-id prompts to /v1/completions); `native`:
    OpenAI tool calls over /v1/chat/completions; `auto`: text for the shipped tiny policies and local paths,
    native otherwise."""
    tasks: str | None = None
    """JSONL or Parquet task file to evaluate instead of the scaffold's bundled tasks (every row, any split)."""
    split: str = "test"
    """Split of the scaffold's bundled tasks to evaluate."""
    tiers: tuple[str, ...] = ()
    """Keep only tasks whose `metadata["tier"]` is one of these (`easy`, `medium`, `hard` in the bundled
    swe, terminal and gui scaffolds); empty keeps every task."""
    max_tasks: int | None = None
    """Evaluate only the first this many tasks; None = all."""
    samples_per_task: int = 1
    """Samples per task (pass@k is reported for k up to this)."""
    temperature: float = 0.0
    """Sampling temperature; 0 = greedy (use > 0 with several samples per task)."""
    top_p: float = 1.0
    """Nucleus sampling threshold."""
    max_turns: int = 4
    """Policy turns per episode."""
    max_new_tokens_per_turn: int | None = None
    """Tokens per turn; None = the training default for the text format, 1024 for the native format."""
    max_concurrent_episodes: int = 8
    """Episodes in flight at once (each has at most one request outstanding)."""
    request_timeout_s: float = 120.0
    """Timeout of one request to the endpoint."""
    max_retries: int = 4
    """Retries of a request on rate limits (429) and transport errors, with exponential backoff."""
    output: str | None = None
    """Results JSONL (a rerun skips the (task, sample) pairs it already holds); default under `evals/`."""
    seed: int = 0
    """Seed of the per-episode sampling seeds."""
    device: str = "auto"
    """Torch device for an in-process checkpoint."""
    tool_server: ToolServerConfig = field(default_factory=ToolServerConfig)
    """Limits and sandbox of the in-process tool server the scaffold's tools run in."""


@dataclass(frozen=True)
class RunConfig:
    """Everything `agentrl train` needs."""

    scaffold: str = "code+search"
    """Scaffold by registry name or dotted path; `a+b` mixes the tasks of several scaffolds."""
    tools: tuple[str, ...] = ()
    """Toolsets for the `react` scaffold: import paths of modules, classes or @tool functions."""
    tasks: str | None = None
    """JSONL or Parquet file of tasks (`prompt`, `answer`, optional `id`, `split`) for the `react` scaffold."""
    tiers: tuple[str, ...] = ()
    """Train and evaluate only on tasks whose `metadata["tier"]` is one of these (`easy`, `medium`, `hard` in
    the bundled swe, terminal and gui scaffolds); empty keeps every task."""
    system_prompt: str | None = None
    """System prompt for the `react` scaffold (default: a short generic one)."""
    rewards: tuple[str, ...] = ()
    """Reward names or dotted paths, optionally `name:weight`; empty = each scaffold's defaults."""
    reward_filters: tuple[str, ...] = ()
    """Group filters applied after scoring, in order, by name or dotted path: `dynamic_sampling`, `gra_gate`,
    `prof`, `prof_correct`, `roc` (see `agentrl/rewards/combinators.py`)."""
    name: str | None = None
    """Run name; the run directory is `<output_dir>/<name>` (default: a timestamp)."""
    output_dir: str = "runs"
    """Parent directory of run directories."""
    seed: int = 0
    """Seed for task sampling, sampling and initialisation."""
    tool_servers: tuple[str, ...] = ()
    """Base URLs of running tool servers; empty = serve the scaffold's tools in-process."""
    tool_server_token: str | None = None
    """Bearer token for the tool servers."""
    tool_server: ToolServerConfig = field(default_factory=ToolServerConfig)
    """Limits and sandbox of the in-process tool server (used when `tool_servers` is empty)."""
    checkpoint_every_steps: int = 10
    """Save a resumable checkpoint every this many steps (and at the end)."""
    keep_checkpoints: int = 2
    """Most recent checkpoints kept on disk."""
    tensorboard: bool = True
    """Also write TensorBoard event files."""
    progress: bool = True
    """Show a live progress bar."""
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)

    def __post_init__(self) -> None:
        checks = [
            (self.rollout.samples_per_prompt >= 2, "rollout.samples_per_prompt must be >= 2 for group advantages"),
            (self.rollout.prompts_per_step >= 1, "rollout.prompts_per_step must be >= 1"),
            (self.rollout.max_turns >= 1, "rollout.max_turns must be >= 1"),
            (self.trainer.minibatches_per_step >= 1, "trainer.minibatches_per_step must be >= 1"),
            (self.trainer.lr > 0, "trainer.lr must be positive"),
            (self.trainer.clip_low >= 0 and self.trainer.clip_high >= 0, "clip ranges must be >= 0"),
            (self.trainer.dual_clip == 0 or self.trainer.dual_clip > 1, "trainer.dual_clip must be 0 or > 1"),
            (
                self.policy.backend in ("transformers", "vllm", "openai"),
                "policy.backend must be transformers, vllm or openai",
            ),
            (self.rollout.branching in ("none", "arpo", "aepo"), "rollout.branching must be none, arpo or aepo"),
            (
                self.rollout.extra_groups_per_step >= 0 and self.rollout.max_staleness_steps >= 0,
                "rollout.extra_groups_per_step and rollout.max_staleness_steps must be >= 0",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)


# --- loading: defaults ← TOML ← dotted overrides --------------------------------------------------------


def load_config(path: str | Path | None = None, overrides: list[str] | tuple[str, ...] = (), cls: type = RunConfig):
    """Build a config (a `RunConfig` unless `cls` says otherwise) from its defaults, an optional TOML file and
    `key.sub=value` overrides."""
    return load_dataclass(cls, path, overrides)
