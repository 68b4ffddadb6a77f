"""Run configuration: frozen dataclasses mapped 1:1 to the command line.

`agentrl train -c run.toml trainer.lr=1e-5 rollout.samples_per_prompt=4` builds a `RunConfig` from the
defaults, then the TOML file, then the dotted overrides, in that order. Each section lives beside the code it
configures (`agentrl.policy.config`, `agentrl.rollout.config`, `agentrl.train.config`, `agentrl.eval.config`,
`agentrl.toolserver.config`); this module composes them and exports them all. Each field's attribute docstring
is its help text (`agentrl train --help-config`). Quantities carry their unit in their name; totals are derived
properties, checked once in `__post_init__`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agentrl.config_io import ConfigError, dump_toml, field_docs, from_dict, load_dataclass, to_dict
from agentrl.distributed.config import RayConfig
from agentrl.eval.config import EvalConfig, EvalRunConfig
from agentrl.policy.config import PolicyConfig
from agentrl.rollout.config import RolloutConfig
from agentrl.runlog.config import LoggingConfig
from agentrl.tasks import TaskSourceConfig
from agentrl.toolserver.config import ToolServerConfig
from agentrl.train.config import TrainerConfig

__all__ = [
    "ConfigError",
    "EvalConfig",
    "EvalRunConfig",
    "LoggingConfig",
    "PolicyConfig",
    "RolloutConfig",
    "RunConfig",
    "ToolServerConfig",
    "TrainerConfig",
    "dump_toml",
    "field_docs",
    "from_dict",
    "load_config",
    "absolute_paths",
    "run_config",
    "to_dict",
]


@dataclass(frozen=True)
class RunConfig:
    """Everything `agentrl train` needs."""

    scaffold: str = "code+search"
    """Scaffold by registry name or dotted path; `a+b` mixes the tasks of several scaffolds."""
    tools: tuple[str, ...] = ()
    """Toolsets for the `react` scaffold: import paths of modules, classes or @tool functions."""
    tasks: TaskSourceConfig = field(default_factory=TaskSourceConfig)
    """Tasks for the `react` and `agent` scaffolds: `tasks=PATH` (a file, a directory, a dataset id, a gateway
    recording) is short for `tasks.path=PATH`; `tasks.*` maps columns and splits."""
    agent: str | None = None
    """Import path of an async agent function for the `agent` scaffold, `async def agent(task, client, model)`
    returning the final answer: it runs as the rollout, its OpenAI client served by the policy being trained."""
    tiers: tuple[str, ...] = ()
    """Train and evaluate only on tasks whose `metadata["tier"]` is one of these (`easy`, `medium`, `hard` in
    the bundled swe, terminal and gui scaffolds); empty keeps every task."""
    system_prompt: str | None = None
    """System prompt for the `react` scaffold (default: "Use the tools. Reply with only the final answer.", the one
    the shipped tiny policies learned with)."""
    rewards: tuple[str, ...] = ()
    """Reward names or dotted paths, optionally `name:weight`; empty = each scaffold's defaults."""
    reward_outage_steps: int = 3
    """Stop the run (an infrastructure failure) when a reward failed entirely for this many steps in a row: every
    request it made failed (an LLM judge whose endpoint is down), so it scored nothing. 0 never stops (nor does a
    data-parallel run, whose ranks only warn)."""
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
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    ray: RayConfig = field(default_factory=RayConfig)

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
                self.policy.backend in ("auto", "transformers", "vllm", "openai"),
                "policy.backend must be auto, transformers, vllm or openai",
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


def run_config(
    config: Any, *, scaffold: Any = None, tools: Sequence[Any] = (), tasks: Any = None, rewards: Sequence[Any] = ()
) -> RunConfig:
    """The run's config from what `Trainer` was given: a `RunConfig`, a TOML file, `key=value` overrides or None
    (the defaults), with the Python objects it was given named in it (by import path where they have one), so
    that config.toml says what the run was made of."""
    from agentrl.registry import describe

    if config is None or isinstance(config, (str, Path)):
        config = load_config(config)
    elif not isinstance(config, RunConfig):
        config = load_config(None, list(config))
    named: dict[str, Any] = {}
    if scaffold is not None:
        named["scaffold"] = describe(type(scaffold))
    if tools or tasks is not None:
        chosen = named.get("scaffold", config.scaffold)
        takes = ("react", "agent", RunConfig.scaffold) if not tools else ("react", RunConfig.scaffold)
        if chosen not in takes:
            raise ConfigError(
                f"{'tools' if tools else 'tasks'} configure the react scaffold (tasks: the agent one too), "
                f"but scaffold={chosen!r}"
            )
        named["scaffold"] = "react" if chosen == RunConfig.scaffold else chosen
    if tools:
        named["tools"] = tuple(describe(t) for t in tools)
    if isinstance(tasks, (str, Path)):
        named["tasks"] = replace(config.tasks, path=str(tasks))
    if rewards:
        named["rewards"] = tuple(describe(r[0] if isinstance(r, tuple) else r) for r in rewards)
    return absolute_paths(replace(config, **named) if named else config)


def absolute_paths(config: RunConfig) -> RunConfig:
    """`config` with the local files it names (tasks, a checkpoint, a chat template, the sandbox root) made
    absolute, so that its config.toml resumes the run from any working directory. Names that are not local paths
    (hub ids, `tiny`) stay as they are."""

    def absolute(value: str | None) -> str | None:
        if not value or not Path(value).expanduser().exists():
            return value
        return str(Path(value).expanduser().resolve())

    policy = config.policy
    if policy.model not in _shipped_models():
        policy = replace(policy, model=absolute(policy.model))
    sandbox = config.tool_server.sandbox
    return replace(
        config,
        tasks=replace(config.tasks, path=absolute(config.tasks.path)),
        policy=replace(policy, chat_template=absolute(policy.chat_template)),
        tool_server=replace(config.tool_server, sandbox=replace(sandbox, root_dir=absolute(sandbox.root_dir))),
    )


def _shipped_models() -> tuple[str, ...]:
    from agentrl.tiny import SHIPPED

    return tuple(SHIPPED)
