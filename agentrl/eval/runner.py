"""`agentrl eval`: run a scaffold's tasks against an endpoint or a local checkpoint and report pass@k.

Two transports, one scaffold:
- **text** (local checkpoints): the scaffold's own token-level episode (`Scaffold.run`) with the checkpoint's
  chat template, sampled in-process, or, with `base_url`, sent as token-id prompts to `/v1/completions`
  (`agentrl serve`, vLLM, SGLang) so the endpoint sees exactly the ids the trainer would;
- **native** (API models): the same tasks, tools and prompts over `/v1/chat/completions` with OpenAI tool calls
  (`agentrl.eval.chat_episode`): to `base_url` through the openai SDK with the model name as given (`Org/Model`
  included), or, without one, to a hosted provider through litellm (`provider/model`).

Episodes run concurrently up to `max_concurrent_episodes`; each is appended to the results JSONL as it
finishes, so an interrupted evaluation resumes where it stopped. Requests retry on rate limits and transport
errors only, with backoff, each under its own timeout.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import time
from pathlib import Path
from typing import Any

from agentrl.config import EvalRunConfig, PolicyConfig, RolloutConfig
from agentrl.errors import ConfigError
from agentrl.eval.outcomes import Outcome, require_valid
from agentrl.eval.results import EvalRecord, ResultsStore, token_counts
from agentrl.eval.summary import summarize, table, write_summary
from agentrl.protocols import SamplingParams
from agentrl.rollout.collect import infra_failure, trajectory_seed
from agentrl.runlog.step_stats import success_of
from agentrl.tasks import select_tiers
from agentrl.types import Task, Trajectory

NATIVE_MAX_NEW_TOKENS = 1024


@dataclasses.dataclass(frozen=True)
class EvalOutcome:
    """What one `agentrl eval` invocation produced."""

    summary: dict[str, Any]
    records: list[EvalRecord]
    results_path: Path
    written: list[Path]
    text: str

    def require_valid(self) -> None:
        """Raise `InfraError` naming the first failure when every episode in the results failed for
        infrastructure reasons (the summary then measured nothing); `agentrl eval` exits non-zero on it."""
        require_valid([Outcome.of_record(r) for r in self.records], f"the evaluation in {self.results_path}")


def transport(config: EvalRunConfig) -> str:
    """`text` or `native` for `config.format` (`auto`: text for the shipped tiny policies and local paths)."""
    from agentrl.policy.loading import looks_like_path, resolve_model_path
    from agentrl.tiny import SHIPPED

    if config.format not in ("auto", "text", "native"):
        raise ConfigError(f"eval format must be auto, text or native, not {config.format!r}")
    local = config.format == "text" or (config.format == "auto" and config.base_url is None)
    if local and looks_like_path(config.model):  # a server may name its model by its path; a checkpoint is here
        resolve_model_path(config.model)  # one that is not fails here, never as a model name sent to an API
    if config.format != "auto":
        return config.format
    return "text" if config.model in SHIPPED or Path(config.model).expanduser().exists() else "native"


OUTCOME_SETTINGS = (
    *("scaffold", "model", "tasks", "split", "tiers", "temperature", "top_p", "max_turns", "max_new_tokens_per_turn"),
    *("seed", "tool_parser", "chat_template", "enable_thinking"),
)
"""What decides an episode's outcome: a results file resumes only under the same. Not the endpoint (a server may
move), nor how many tasks or samples (a rerun may add some), nor limits of time and concurrency."""


def outcome_settings(config: EvalRunConfig, mode: str) -> dict[str, Any]:
    """The settings a results file records and a rerun must match (the transport as resolved, not `auto`)."""
    chosen = dataclasses.asdict(config)
    return {"format": mode, **{key: chosen[key] for key in OUTCOME_SETTINGS}}


def results_path(config: EvalRunConfig) -> Path:
    if config.output:
        return Path(config.output)
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(config.model).name or config.model)
    return Path("evals") / f"{config.scaffold.replace('+', '_')}__{slug}.jsonl"


class RetryingPolicy:
    """A token-level policy whose requests retry on rate limits and transport errors (see `chat_policy`)."""

    def __init__(self, policy: Any, *, max_retries: int, backoff_s: float = 1.0):
        self.policy, self.tokenizer, self.version = policy, policy.tokenizer, policy.version
        self.chat_settings = getattr(policy, "chat_settings", None)
        self.max_retries, self.backoff_s = max_retries, backoff_s

    async def generate(self, prompt_ids: Any, params: SamplingParams) -> Any:
        from agentrl.policy.chat_policy import with_retries

        result, _ = await with_retries(
            lambda: self.policy.generate(prompt_ids, params), max_retries=self.max_retries, backoff_s=self.backoff_s
        )
        return result


def build_eval_policy(config: EvalRunConfig, mode: str) -> Any:
    """The policy the episodes sample from."""
    if mode == "native":
        from agentrl.policy.chat_policy import OpenAIChatPolicy

        return OpenAIChatPolicy(
            config.model,
            base_url=config.base_url,
            api_key=config.api_key,
            timeout_s=config.request_timeout_s,
            max_retries=config.max_retries,
        )
    from agentrl.policy import load_model_and_tokenizer, resolve_model_path
    from agentrl.policy.backends import chat_settings

    policy_config = PolicyConfig(
        model=config.model,
        device=config.device,
        tool_parser=config.tool_parser,
        chat_template=config.chat_template,
        enable_thinking=config.enable_thinking,
    )
    if config.base_url is None:
        from agentrl.policy.transformers_policy import TransformersPolicy

        model, tokenizer = load_model_and_tokenizer(policy_config, trainable=False)
        settings = chat_settings(policy_config, tokenizer, model)
        policy = TransformersPolicy(model.eval(), tokenizer, eos_token_ids=settings.eos_token_ids)
        policy.chat_settings = settings
        return policy
    from agentrl.policy.loading import load_tokenizer
    from agentrl.policy.openai_policy import OpenAICompletionsPolicy

    tokenizer = load_tokenizer(resolve_model_path(config.model))
    settings = chat_settings(policy_config, tokenizer)
    remote = OpenAICompletionsPolicy(
        tokenizer,
        base_url=config.base_url,
        model=config.model,
        api_key=config.api_key,
        timeout_s=config.request_timeout_s,
        max_retries=0,
    )
    remote.chat_settings = settings
    return RetryingPolicy(remote, max_retries=config.max_retries)


def eval_tasks(config: EvalRunConfig, scaffold: Any) -> list[Task]:
    if config.tasks:
        from agentrl.tasks import load_task_file

        tasks = load_task_file(config.tasks)
    else:
        tasks = list(scaffold.tasks(config.split))
    tasks = select_tiers(tasks, config.tiers)
    if not tasks:
        tiers = f" in tiers {list(config.tiers)}" if config.tiers else ""
        raise ConfigError(f"scaffold {config.scaffold!r} has no {config.split!r} tasks{tiers}; pass a task file")
    return tasks[: config.max_tasks] if config.max_tasks is not None else tasks


async def evaluate(config: EvalRunConfig) -> EvalOutcome:
    """Evaluate, append to the results file, and summarize everything it holds."""
    from agentrl.doctor.preflight import check_eval
    from agentrl.registry import load_scaffold
    from agentrl.reward import RewardStack
    from agentrl.toolserver.app import create_app
    from agentrl.toolserver.client import ToolClient

    mode = transport(config)
    default_tokens = NATIVE_MAX_NEW_TOKENS if mode == "native" else RolloutConfig.max_new_tokens_per_turn
    rollout = RolloutConfig(
        temperature=config.temperature,
        top_p=config.top_p,
        max_turns=config.max_turns,
        max_new_tokens_per_turn=config.max_new_tokens_per_turn or default_tokens,
    )
    scaffold = load_scaffold(config.scaffold, rollout)
    tasks = eval_tasks(config, scaffold)
    rewards = RewardStack.from_specs(scaffold.reward_names())
    store = ResultsStore(results_path(config))
    store.claim(outcome_settings(config, mode), overwrite=config.overwrite)  # resume only what these settings made
    done = store.finished()
    jobs = [(t, s) for t in tasks for s in range(config.samples_per_task) if (t.id, s) not in done]
    if jobs:  # what the episodes need (sandbox, browser, the endpoint), in seconds, before the policy loads
        await check_eval(config, scaffold)
    policy = build_eval_policy(config, mode)
    tools = ToolClient(app=create_app(list(scaffold.toolsets()), config=config.tool_server))
    gate = asyncio.Semaphore(config.max_concurrent_episodes)
    primary = rewards.names[0]

    async def one(task: Task, sample: int) -> None:
        async with gate:
            start = time.perf_counter()
            trajectory, usage = await _episode(scaffold, task, sample, policy, tools, rollout, mode, config.seed)
            latency = time.perf_counter() - start
        trajectory = await rewards.score(task, trajectory)
        success = success_of(trajectory, primary) >= 1.0
        store.append(
            EvalRecord.from_trajectory(
                trajectory,
                sample=sample,
                success=success,
                latency_s=latency,
                prompt_tokens=usage[0],
                completion_tokens=usage[1],
                scaffold=task.scaffold,
            )
        )

    started = time.perf_counter()
    try:
        await asyncio.gather(*(one(t, s) for t, s in jobs))
    finally:
        await tools.aclose()
        inner = getattr(policy, "policy", policy)  # a RetryingPolicy closes what it wraps
        if hasattr(inner, "aclose"):
            await inner.aclose()
    wall_s = time.perf_counter() - started
    wanted = {(t.id, s) for t in tasks for s in range(config.samples_per_task)}
    records = [r for r in store.load() if (r.task_id, r.sample) in wanted]
    summary = summarize(records, wall_s=wall_s, episodes_run=len(jobs))
    summary["skipped_finished"] = len(wanted) - len(jobs)
    written = [store.path] + write_summary(records, summary, store.path)
    title = f"eval {config.scaffold} · {config.model} · {mode} · {store.path}"
    return EvalOutcome(summary, records, store.path, written, table(summary, title))


async def _episode(
    scaffold: Any, task: Task, sample: int, policy: Any, tools: Any, rollout: RolloutConfig, mode: str, seed: int
) -> tuple[Trajectory, tuple[int, int]]:
    group_id = f"eval/{task.id}"
    trajectory_id = f"{group_id}/{sample}"
    episode_seed = trajectory_seed(seed, 0, task.id, sample)
    try:
        if mode == "native":
            from agentrl.eval.chat_episode import run_chat_episode

            if hasattr(scaffold, "scaffolds"):  # a mixture: the task's own scaffold plays it
                scaffold = scaffold.scaffolds[task.scaffold]

            trajectory, prompt_tokens, completion_tokens = await run_chat_episode(
                scaffold,
                task,
                policy,
                tools,
                rollout=rollout,
                group_id=group_id,
                trajectory_id=trajectory_id,
                seed=episode_seed,
            )
            return trajectory, (prompt_tokens, completion_tokens)
        trajectory = await scaffold.run(
            task, policy, tools, group_id=group_id, trajectory_id=trajectory_id, seed=episode_seed
        )
        return trajectory, token_counts(trajectory)
    except Exception as e:  # a scaffold crash is an infrastructure failure of this episode only
        return infra_failure(task, group_id, trajectory_id, e, policy), (0, 0)


def run_eval(config: EvalRunConfig) -> EvalOutcome:
    """The body of `agentrl eval`."""
    return asyncio.run(evaluate(config))
