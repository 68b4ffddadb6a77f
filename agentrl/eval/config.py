"""`EvalConfig` (held-out evaluation during training) and `EvalRunConfig` (`agentrl eval`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from agentrl.tasks import TaskSourceConfig
from agentrl.toolserver.config import ToolServerConfig


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
    """Model name at the endpoint (without base_url, `provider/model` goes through litellm), or `tiny` /
    `tiny-extended` / `tiny-swe` / a checkpoint path."""
    base_url: str | None = None
    """OpenAI-compatible base URL (`http://host:port/v1`); None evaluates a local checkpoint in-process."""
    api_key: str | None = None
    """API key (defaults to $OPENAI_API_KEY, then `EMPTY`)."""
    format: str = "auto"
    """`text`: the scaffold's token-level loop (in-process, or token-id prompts to /v1/completions); `native`:
    OpenAI tool calls over /v1/chat/completions; `auto`: text for the shipped tiny policies and local paths,
    native otherwise."""
    tasks: TaskSourceConfig = field(default_factory=TaskSourceConfig)
    """Tasks to evaluate instead of the scaffold's bundled ones (every row, any split): `tasks=PATH` (a file, a
    directory, a dataset id, a gateway recording) is short for `tasks.path=PATH`; `tasks.*` maps columns."""
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
    """Results JSONL (a rerun with the same settings skips the (task, sample) pairs it already holds; one with other
    settings is refused); default under `evals/`."""
    overwrite: bool = False
    """Start the results file over instead of resuming it (needed when its results were made with other settings)."""
    seed: int = 0
    """Seed of the per-episode sampling seeds."""
    device: str = "auto"
    """Torch device for an in-process checkpoint."""
    tool_parser: str = "auto"
    """Tool-call format of the text transport (see `policy.tool_parser`)."""
    chat_template: str | None = None
    """A Jinja chat template file for the text transport, instead of the tokenizer's own."""
    enable_thinking: bool | None = None
    """Passed to the chat template as `enable_thinking` (text transport); None = the template's default."""
    tool_server: ToolServerConfig = field(default_factory=ToolServerConfig)
    """Limits and sandbox of the in-process tool server the scaffold's tools run in."""
