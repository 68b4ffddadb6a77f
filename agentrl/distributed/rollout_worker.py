"""`RolloutWorker`: a Ray actor that plays episodes with a sampler and scaffolds of its own.

A worker builds what the trainer builds for its rollouts, from the run's config alone: the training and
evaluation scaffolds, the policy's model and tokenizer, and the sampler `policy.backend` names: an in-process
replica of the policy (`transformers`), an in-process vLLM engine on the worker's GPU (`vllm`, `ray.worker_gpus=1`),
or clients of the inference servers (`openai`, whose weights the trainer updates itself). Its tool backend is the
run's tool-server actors (or `tool_servers`), or its own in-process toolsets.

It is an async actor: every `collect` call is one task's group, many run at once on the actor's event loop, and
`rollout.max_concurrent_trajectories` bounds the trajectories in flight across them, so concurrent episodes share
the sampler's batches as they do in one process. Weights come through Ray's object store: `load_weights` after each
learner step, and every `collect` names the version it must play with, so a worker Ray has just restarted catches up
before its first episode, and every trajectory is stamped with the version that sampled it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Sequence
from typing import Any

from agentrl.types import Task, TrajectoryGroup


class RolloutWorker:
    """Plays `collect` calls for the run `config` describes, with tools at `tool_urls` (none: in-process);
    `policy_factory(tokenizer)`, when given, makes the sampler instead of `policy.backend`."""

    def __init__(self, config: Any, tool_urls: Sequence[str], token: str | None, policy_factory: Any = None) -> None:
        import torch

        from agentrl.builders import build_scaffold
        from agentrl.policy import build_policy, load_model_and_tokenizer
        from agentrl.rollout.collect import Slots
        from agentrl.train.precision import cast_parameters, parameter_dtype, resolve_precision

        random.seed(config.seed)
        torch.manual_seed(config.seed)  # a randomly initialised model starts as the trainer's did
        self.config = config
        self.scaffold = build_scaffold(config, config.rollout)
        eval_rollout = dataclasses.replace(config.rollout, temperature=config.eval.temperature)
        self.eval_scaffold = build_scaffold(config, eval_rollout)
        policy_config = config.policy
        if policy_config.backend == "openai":  # the trainer pushes weights to the servers; workers only sample
            policy_config = dataclasses.replace(policy_config, off_policy=True, weight_sync="none")
        self.model, self.tokenizer = load_model_and_tokenizer(policy_config)
        params = [p for p in self.model.parameters() if p.requires_grad] or list(self.model.parameters())
        # the trainer's learner computes with parameters of this dtype (bf16 under bf16-mixed): so does this sampler
        cast_parameters(self.model, parameter_dtype(resolve_precision(config.trainer.precision, params)))
        if policy_factory is not None:  # a stand-in for the model (`agentrl bench scale`): from the tokenizer
            self.policy = policy_factory(self.tokenizer)
        else:
            precision = resolve_precision(config.trainer.precision, params)
            self.policy = build_policy(policy_config, self.model, self.tokenizer, precision=precision)
        self.tool_urls: tuple[str, ...] = ()
        self.token = token
        self.tools = self._tool_client(tuple(tool_urls))
        self.retired: list[Any] = []
        self.slots = Slots(config.rollout.max_concurrent_trajectories)
        self.version: int | None = None
        self._loading = asyncio.Lock()
        self.in_flight = 0
        self.step = -1

    def ready(self) -> bool:
        return True

    async def collect(
        self,
        tasks: Sequence[Task],
        step: int,
        evaluation: bool,
        version: int,
        weights: Sequence[Any],
        tool_urls: Sequence[str],
    ) -> list[TrajectoryGroup]:
        """One group per task, played with the weights of `version` (`weights`: the object refs to load them from,
        in a list so that Ray does not fetch them when this worker has them already)."""
        from agentrl.rollout.collect import collect_groups
        from agentrl.rollout.local_rollouts import collect_settings

        await self.load_weights(version, weights)
        if tuple(tool_urls) != self.tool_urls and tool_urls:  # a tool server was restarted elsewhere
            self.retired.append(self.tools)
            self.tools = self._tool_client(tuple(tool_urls))
        self.in_flight += len(tasks)
        self.step = step
        try:
            return await collect_groups(
                self.eval_scaffold if evaluation else self.scaffold,
                tasks,
                self.policy,
                self.tools,
                **collect_settings(self.config, step, evaluation=evaluation),
                slots=self.slots,
            )
        finally:
            self.in_flight -= len(tasks)

    async def load_weights(self, version: int, weights: Sequence[Any]) -> float:
        """Load the learner's weights of `version` (refs to state dicts, applied in order) unless loaded already;
        the seconds it took."""
        import time

        import torch

        started = time.monotonic()
        async with self._loading:
            if self.version == version:
                return 0.0
            for ref in weights:
                state = await ref
                with torch.no_grad():
                    unknown = self.model.load_state_dict(state, strict=False).unexpected_keys
                if unknown:  # a subset of the parameters is fine (the trainable ones); others are a mismatch
                    raise ValueError(f"published weights the worker's model does not have: {unknown[:3]}")
            if weights and hasattr(self.policy, "refresh_weights"):  # a sampler with weights of its own (vLLM)
                self.policy.refresh_weights()  # on this running loop it only notes them: load them before playing
                if hasattr(self.policy, "start"):
                    await self.policy.start()
            self.policy.version = self.version = version
        return time.monotonic() - started

    def busy(self) -> dict[str, int]:
        """Tasks being played now, and the step of the latest (-1: evaluation, or nothing in flight)."""
        return {"tasks": self.in_flight, "step": self.step if self.in_flight else -1}

    async def aclose(self) -> None:
        for tools in [*self.retired, self.tools]:
            await tools.aclose()
        if hasattr(self.policy, "aclose"):
            await self.policy.aclose()

    def _tool_client(self, urls: tuple[str, ...]) -> Any:
        from agentrl.builders import build_tool_client
        from agentrl.toolserver.client import ToolClient

        self.tool_urls = urls
        if urls:
            return ToolClient(list(urls), token=self.token)
        return build_tool_client(self.config, self.scaffold)
