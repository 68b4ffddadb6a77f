"""The training loop, as named phases.

    for step in steps:
        groups  = collect(step)        # rollouts: every trajectory its own task, tools through the tool server
        groups  = score(groups)        # reward stack: outcome / process / ... ; infra failures stay unscored
        groups  = filter(gather(groups))  # every rank's groups (several processes); reward filters
        samples = credit(groups)       # group-relative advantages → per-token advantages
        stats   = update(samples)      # learner: clipped policy gradient, AdamW
        sync()                         # the sampler sees the new weights
        evaluate(step)                 # held-out success, every few steps; trajectories/eval_step_*.jsonl
        log(step, ...)                 # metrics.jsonl, TensorBoard, progress bar, trajectories/step_*.jsonl
        checkpoint(step)               # resumable state in the run directory

Each phase is one method call; the work lives in the modules named in the comments. Several processes
(`agentrl train --nproc N`) run the same loop data-parallel: each collects, scores and evaluates its share of the
tasks (with `--ray`, rank 0's rollout workers play them all and each rank gets its share), every rank then holds
the whole scored batch, and the update splits each mini-batch over the ranks (`agentrl/train/distributed.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import random
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentrl.builders import build_rewards, build_scaffold
from agentrl.config import RunConfig, dump_toml, load_config, run_config
from agentrl.credit.assign import assign_credit
from agentrl.distributed.rollouts import build_rollouts
from agentrl.doctor.model_doctor import require_chat_format
from agentrl.doctor.preflight import check_train
from agentrl.errors import ConfigError
from agentrl.policy import build_policy, context_window, load_model_and_tokenizer, past_context_warning
from agentrl.policy.backends import choose_backend
from agentrl.registry import resolve
from agentrl.reward import RewardOutages, apply_filters, component_metrics
from agentrl.rollout.partial import PartialRollouts
from agentrl.runlog.background import run_awaitable, run_blocking
from agentrl.runlog.metrics import MetricsLogger
from agentrl.runlog.progress import RolloutProgress, TrainProgress
from agentrl.runlog.run_dir import new_run_dir
from agentrl.runlog.step_stats import require_some_valid, rewind_logs, rollout_metrics, success_of, write_trajectories
from agentrl.runlog.turn_credit import TurnCredit
from agentrl.tasks import select_tiers
from agentrl.train.checkpoint import TrainerState, latest_checkpoint, load_carried, load_checkpoint, save_checkpoint
from agentrl.train.distributed import DataParallel
from agentrl.train.learner import Learner
from agentrl.train.objective import check_trainer_config
from agentrl.train.reference import reference_model
from agentrl.train.samples import TrainSample
from agentrl.types import TrajectoryGroup


class Trainer:
    """Owns the run directory, the model, the sampler, the tool backend and the learner for one run."""

    def __init__(
        self,
        config: RunConfig | str | Path | Sequence[str] | None = None,
        run_dir: str | Path | None = None,
        *,
        scaffold: Any = None,
        tools: Sequence[Any] = (),
        tasks: Any = None,
        rewards: Sequence[Any] = (),
        resume: bool = False,
    ):
        """`config` is a `RunConfig`, a TOML file or a list of `key=value` overrides (default: the defaults);
        `run_dir` defaults to `<output_dir>/<name>`. From Python, the run's parts may be objects instead of
        names: a scaffold object, `@tool` functions (or toolset modules and classes) and tasks (a list of `Task`s
        or dicts, or a task file) for the generic react scaffold, and reward objects or `(reward, weight)` pairs.
        Objects are not saved in `config.toml`; resume with `Trainer.from_run_dir(run_dir, tools=…)` again."""
        import torch

        config = run_config(config, scaffold=scaffold, tools=tools, tasks=tasks, rewards=rewards)
        self.dp = DataParallel.from_environment()
        if run_dir is None:  # rank 0 names it (a timestamp, unless named) and every rank writes under that name
            run_dir = self.dp.share(new_run_dir(config, resume=resume) if self.dp.is_main else None)
        self.config, self.run_dir = config, Path(run_dir)
        if (self.dp.enabled or config.ray.enabled) and config.rollout.extra_groups_per_step:
            raise ConfigError("rollout.extra_groups_per_step (partial rollouts) runs in one process only, for now")
        if config.ray.enabled and (scaffold is not None or tools or tasks is not None):
            raise ConfigError(
                "with --ray the workers build the scaffold, tools and tasks from the config: name them there "
                "(import paths, task files) instead of passing objects"
            )
        self.loop = asyncio.new_event_loop()
        self._stop = threading.Event()
        random.seed(config.seed)
        torch.manual_seed(config.seed)
        parts = {"scaffold": scaffold, "tools": tools, "tasks": tasks}
        self.scaffold = build_scaffold(config, config.rollout, **parts)
        self.rewards = build_rewards(config.rewards or self.scaffold.reward_names(), rewards)
        check_train(config, self.scaffold, self.rewards)  # sandbox, servers, judges: before the model loads
        check_trainer_config(config.trainer)  # a loss that cannot act is refused before the model loads
        require_chat_format(config.policy)  # the model's template, tool format and end of turn, before its weights
        eval_rollout = dataclasses.replace(config.rollout, temperature=config.eval.temperature)
        self.eval_scaffold = build_scaffold(config, eval_rollout, **parts)
        self.train_tasks = select_tiers(self.scaffold.tasks("train"), config.tiers)
        self.eval_tasks = select_tiers(self.eval_scaffold.tasks("test"), config.tiers)[: config.eval.max_tasks]
        if not self.train_tasks:
            tiers = f" in tiers {list(config.tiers)}" if config.tiers else ""
            raise ConfigError(f"scaffold {config.scaffold!r} has no training tasks{tiers}")
        # ranks see different requests fail: one stopping alone would leave the others in a collective, so warn only
        self.reward_outages = RewardOutages(0 if self.dp.enabled else config.reward_outage_steps)
        self.model, self.tokenizer = load_model_and_tokenizer(config.policy)
        self.context_window = context_window(self.model)
        self.learner = Learner(
            self.model,
            config.trainer,
            pad_token_id=self.tokenizer.pad_token_id,
            ref_model=reference_model(self.model, config),
            data_parallel=self.dp,
            temperature=config.rollout.temperature,
            episode_token_budget=config.rollout.max_tokens_per_episode,
            remote_sampler=choose_backend(config.policy)[0] != "transformers",  # `auto` resolved as build_policy will
            activation_checkpointing=config.policy.gradient_checkpointing,
        )
        # the in-process sampler shares the model's parameters, in the learner's dtype (bf16 under bf16-mixed), so it
        # computes as the learner does with no autocast of its own; vLLM engines compute in that dtype too
        self.policy = build_policy(config.policy, self.model, self.tokenizer, precision=self.learner.precision)
        self.rollouts = build_rollouts(
            config, self.scaffold, self.eval_scaffold, self.policy, self.run_dir.name, self.dp
        )
        self.partial = PartialRollouts.for_run(
            config.rollout, self.scaffold, self.policy, self.rollouts.tools, seed=config.seed
        )
        self.state = TrainerState(step=0, wall_s=0.0, policy_version=0)
        if resume and (ckpt := latest_checkpoint(self.run_dir)) is not None:
            self.state = load_checkpoint(ckpt, self.model, self.learner)
            self.policy.version = self.state.policy_version
            if hasattr(self.policy, "refresh_weights"):  # a sampler with weights of its own gets the checkpoint's
                self.policy.refresh_weights()
            if self.partial is not None:  # the carried groups' sessions died with the old process: re-issue them
                self.partial.restore(load_carried(ckpt), {t.id: t for t in self.train_tasks})
        self.rollouts.publish(self.model, self.policy.version)  # samplers elsewhere start from these weights
        if resume and self.dp.is_main:
            rewind_logs(self.run_dir, self.state.step)
        self.metrics = (
            MetricsLogger(self.run_dir, tensorboard=config.tensorboard, logging=config.logging, run_config=config)
            if self.dp.is_main
            else None
        )

    @classmethod
    def from_run_dir(cls, run_dir: str | Path, overrides: Sequence[str] = (), **parts: Any) -> Trainer:
        """Resume a run from its directory (its saved config, plus any overrides such as trainer.steps=…); a run
        built from Python objects takes the same objects again in `parts` (scaffold, tools, tasks, rewards)."""
        config = load_config(Path(run_dir) / "config.toml", overrides)
        return cls(config, run_dir, resume=True, **parts)

    # --- the loop --------------------------------------------------------------------------------------

    def run(self) -> dict[str, float]:
        """Train to the end (or to `trainer.max_minutes`); returns the last step's metrics. Inside a running event
        loop (a notebook) the run goes on in a thread of its own while this call waits for it; an interrupt stops
        it after the current step, checkpointed."""
        return run_blocking(self._run, self.stop)

    async def arun(self) -> dict[str, float]:
        """`run()` for async code: the run goes on in a thread of its own, so the caller's event loop stays free;
        cancelling the await stops the run after the current step, checkpointed."""
        return await run_awaitable(self._run, self.stop)

    def stop(self) -> None:
        """Ask a running `run()` to stop after the current step (checkpointed); safe from any thread."""
        self._stop.set()

    def _run(self) -> dict[str, float]:
        cfg = self.config
        if self.dp.is_main:
            (self.run_dir / "config.toml").write_text(dump_toml(cfg))
        started = time.monotonic() - self.state.wall_s
        last: dict[str, float] = {}
        shown = cfg.progress and self.dp.is_main
        try:
            with TrainProgress(cfg.trainer.steps, enabled=shown, start_step=self.state.step) as progress:
                if shown and (note := getattr(self.policy, "backend_note", None)):  # which sampler runs, and why
                    progress.log(note)
                if warning := past_context_warning(cfg.rollout.max_tokens_per_episode, self.context_window):
                    progress.log(warning)
                if self.state.step == 0 and cfg.eval.every_steps:
                    last = self.evaluate(0)
                    self.log(0, last, progress)
                while self.state.step < cfg.trainer.steps:
                    last, out_of_time = self.train_step(self.state.step + 1, started, progress)
                    if out_of_time:
                        progress.log(f"stopping after {self.state.wall_s / 60:.1f} min (trainer.max_minutes)")
                        break
                    if self._stop.is_set():
                        self.checkpoint(self.state.step, force=True)
                        progress.log(f"stopped after step {self.state.step} (checkpointed)")
                        break
        finally:
            self.close()
        return last

    def train_step(self, step: int, started: float, progress: TrainProgress) -> tuple[dict[str, float], bool]:
        """One step through every phase; returns its metrics and whether the time budget is spent."""
        cfg = self.config
        t0 = time.monotonic()
        groups, collect_stats = self.collect(step, progress.rollouts)
        groups = self.filter(self.gather(self.score(groups), step))
        outage = self.reward_outages.check([r for r, _ in self.rewards.components], self.score_stats, step)
        if outage is not None:  # a reward whose every request failed: said now, and the run stops if it persists
            progress.log(outage)
        samples, credit_stats = self.credit(groups)
        if hasattr(self.policy, "release_memory"):  # a colocated engine sleeps while the learner updates
            self.policy.release_memory()
        update_stats = self.update(samples)
        synced = time.monotonic()
        self.sync()
        update_stats["time/sync_s"] = time.monotonic() - synced
        stats = {
            **collect_stats,
            **self.score_stats,
            **rollout_metrics(groups, self.rewards.names[0], self.context_window),
            **credit_stats,
            **update_stats,
            "time/step_s": time.monotonic() - t0,
        }
        limit_s = 60 * cfg.trainer.max_minutes if cfg.trainer.max_minutes is not None else float("inf")
        out_of_time = time.monotonic() - started > limit_s
        if self._should_evaluate(step) or (out_of_time and cfg.eval.every_steps):
            stats.update(self.evaluate(step))
        self.state = TrainerState(step, time.monotonic() - started, self.policy.version)
        self.log(step, stats, progress, groups, samples)
        self.checkpoint(step, force=out_of_time)
        return stats, out_of_time

    # --- phases ----------------------------------------------------------------------------------------

    def collect(
        self, step: int, rollouts: RolloutProgress | None = None
    ) -> tuple[list[TrajectoryGroup], dict[str, float]]:
        """The step's groups and rollout statistics; `rollouts` hears of each trajectory as it ends."""
        cfg = self.config
        rng = random.Random(f"{cfg.seed}/{step}")
        tasks = rng.sample(self.train_tasks, min(cfg.rollout.prompts_per_step, len(self.train_tasks)))
        sampler_stats = getattr(self.policy, "stats", None)
        if sampler_stats is not None:
            sampler_stats.reset()
        server_stats = getattr(self.policy, "server_stats", None)  # the openai backend's pool of servers
        if server_stats is not None:
            server_stats.reset()
        t0 = time.monotonic()
        with rollouts if rollouts is not None else contextlib.nullcontext():
            groups = self.loop.run_until_complete(
                self.partial.collect(
                    step, lambda n: rng.sample(self.train_tasks, min(n, len(self.train_tasks))), progress=rollouts
                )
                if self.partial is not None  # partial rollouts: the first complete groups; the rest go on next step
                else self.rollouts.collect(tasks, step, progress=rollouts)
            )
        seconds = time.monotonic() - t0
        trajectories = [t for g in groups for t in g.trajectories]
        if not self.dp.enabled:
            require_some_valid(groups, step)
        sampled = sum(t.num_sampled_tokens for t in trajectories)
        stats = {"time/collect_s": seconds, "rollout/tokens_per_s": sampled / max(seconds, 1e-9)}
        if sampler_stats is not None and sampler_stats.batches:
            stats["rollout/batch_rows_mean"] = sum(sampler_stats.rows) / len(sampler_stats.rows)
        if server_stats is not None:
            stats.update(server_stats.metrics())
        if self.partial is not None:
            stats.update({f"rollout/{k}": float(v) for k, v in dataclasses.asdict(self.partial.stats).items()})
        return groups, stats | self.rollouts.stats

    def score(self, groups: list[TrajectoryGroup]) -> list[TrajectoryGroup]:
        """Reward every trajectory, one reward component at a time over all of them (so model probes batch across
        groups and each component's cost is its own). What it cost lands in `self.score_stats`."""
        items = [(g.task, t) for g in groups for t in g.trajectories]
        probes = getattr(self.policy, "score_stats", None)
        forwards_before = probes.forwards if probes is not None else 0
        t0 = time.monotonic()
        flat, reward_costs = self.loop.run_until_complete(self.rewards.score_batch(items, policy=self.policy))
        rest = iter(flat)
        scored = [TrajectoryGroup(g.task, tuple(next(rest) for _ in g.trajectories)) for g in groups]
        self.score_stats = {
            "time/score_s": time.monotonic() - t0,
            **reward_costs,
            **component_metrics(scored),
        }
        if probes is not None:
            self.score_stats["score/policy_forwards"] = float(probes.forwards - forwards_before)
        return scored

    def gather(self, groups: list[TrajectoryGroup], step: int) -> list[TrajectoryGroup]:
        """Every rank's scored groups, in the tasks' order, on every rank (one process: `groups` as they are)."""
        if not self.dp.enabled:
            return groups
        groups = self.dp.gather(groups)
        require_some_valid(groups, step)
        self.score_stats.update(component_metrics(groups))
        return groups

    def filter(self, groups: list[TrajectoryGroup]) -> list[TrajectoryGroup]:
        """Apply `reward_filters` to the whole batch; what they removed lands in `self.score_stats`."""
        if not self.config.reward_filters:
            return groups
        named = [(spec, resolve("reward_filter", spec)) for spec in self.config.reward_filters]
        groups, filter_stats = apply_filters(named, groups)
        self.score_stats.update(filter_stats)
        return groups

    def credit(self, groups: list[TrajectoryGroup]):
        return assign_credit(groups, config=self.config.trainer)

    def update(self, samples) -> dict[str, float]:
        if not samples:
            return {"train/skipped": 1.0}
        t0 = time.monotonic()
        stats = self.learner.update(samples)
        return {**{f"train/{k}": v for k, v in stats.items()}, "time/update_s": time.monotonic() - t0}

    def sync(self) -> None:
        self.policy.sync_weights()
        self.rollouts.publish(self.model, self.policy.version)

    def evaluate(self, step: int) -> dict[str, float]:
        """Held-out success of the current policy (the `eval.temperature` sampling distribution) over the valid
        episodes, with the infrastructure failures beside it (`eval/infra_errors`, `eval/episodes`; per scaffold
        when several are mixed: `agentrl.eval.outcomes`); an evaluation whose every episode failed raises
        `InfraError`. Its episodes go to `trajectories/eval_step_*.jsonl`, so which held-out tasks a step solves
        can be read back."""
        from agentrl.eval.outcomes import Outcome, heldout_metrics, require_valid

        if not self.eval_tasks:
            return {}
        t0 = time.monotonic()
        episodes = self.rollouts.collect(self.eval_tasks, -1, evaluation=True)
        groups = self.loop.run_until_complete(episodes)
        groups = self.dp.gather(self.score(groups))
        if self.dp.is_main:
            write_trajectories(self.run_dir, f"eval_step_{step:06d}.jsonl", groups)
        primary = self.rewards.names[0]
        outcomes = [Outcome.of(t, g.task.scaffold, success_of(t, primary)) for g in groups for t in g.trajectories]
        require_valid(outcomes, f"the evaluation at step {step}")
        out = {f"eval/{key}": value for key, value in heldout_metrics(outcomes).items()}
        return out | {"time/eval_s": time.monotonic() - t0}

    def log(
        self,
        step: int,
        stats: dict[str, float],
        progress: TrainProgress,
        groups: Sequence[TrajectoryGroup] = (),
        samples: Sequence[TrainSample] = (),
    ) -> None:
        if self.metrics is None:  # a rank other than 0: rank 0 writes the run's logs
            return
        self.metrics.log(step, stats)
        progress.advance(step, stats)
        if groups:
            # the learner's log-probs are this step's only when it updated (a skipped step leaves the last ones)
            updated = samples and "train/skipped" not in stats
            credit = TurnCredit.of(samples, getattr(self.learner, "last_logprobs", None) if updated else None)
            write_trajectories(self.run_dir, f"step_{step:06d}.jsonl", groups, credit)

    def checkpoint(self, step: int, *, force: bool = False) -> None:
        cfg = self.config
        if not (force or step % cfg.checkpoint_every_steps == 0 or step == cfg.trainer.steps):
            return
        learner_state = self.learner.state_dict()  # sharded (trainer.sharding=fsdp): every rank gathers it
        if self.dp.is_main:  # the weights and the gathered optimizer state are the same on every rank
            save_checkpoint(
                self.run_dir,
                self.state,
                self.model,
                self.tokenizer,
                self.learner,
                keep=cfg.keep_checkpoints,
                carried=self.partial.carry_state() if self.partial is not None else (),
                learner_state=learner_state,
            )
        self.dp.barrier()  # no rank runs ahead of the checkpoint on disk

    # --- plumbing --------------------------------------------------------------------------------------

    def _should_evaluate(self, step: int) -> bool:
        every = self.config.eval.every_steps
        return bool(every) and (step % every == 0 or step == self.config.trainer.steps)

    def close(self) -> None:
        if self.metrics is not None:
            self.metrics.close()
        if self.partial is not None:
            self.loop.run_until_complete(self.partial.aclose())
        if hasattr(self.policy, "aclose"):
            self.loop.run_until_complete(self.policy.aclose())
        self.loop.run_until_complete(self.rollouts.aclose())
        self.loop.close()
        self.dp.close()
