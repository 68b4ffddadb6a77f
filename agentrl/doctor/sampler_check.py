"""The slow check of `agentrl doctor`: sample a short tool episode with the model and compare the sampler's
log-probabilities of the sampled tokens with the learner's forward pass over the trajectory's ids.

Token-exact rollouts make the two agree to float precision (about 1e-6 in fp32 on a CPU); a larger gap means
the learner would train on another distribution than the one sampled (different ids, a different temperature,
or a numerics difference between the sampler and the learner), which on-policy algorithms assume away.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agentrl.doctor.verdicts import Verdict
from agentrl.rollout.chat import ChatSettings

GAP_OK = 1e-3
"""Largest mean |sampler − learner| log-probability that passes (bf16 compute lands around 1e-2)."""


def sampler_check(model: Any, tokenizer: Any, settings: ChatSettings, *, max_new_tokens: int = 24) -> list[Verdict]:
    """Sample one short episode with the in-process sampler and measure the sampler–learner gap."""
    trajectory = asyncio.run(_sample(model, tokenizer, settings, max_new_tokens))
    if trajectory.is_infra_failure:
        return [Verdict("sampler agreement", "fail", f"the sampled episode failed: {trajectory.error}")]
    gaps = _gaps(model, trajectory)
    if not gaps:
        return [Verdict("sampler agreement", "warn", "the episode sampled no tokens")]
    mean, worst = sum(gaps) / len(gaps), max(gaps)
    detail = f"|sampler − learner| log-prob over {len(gaps)} sampled tokens: mean {mean:.1e}, max {worst:.1e}"
    if mean > GAP_OK:
        fix = "train with the sampler's own precision and temperature (trainer.precision, rollout.temperature)"
        return [Verdict("sampler agreement", "warn", detail, fix)]
    return [Verdict("sampler agreement", "ok", detail)]


async def _sample(model: Any, tokenizer: Any, settings: ChatSettings, max_new_tokens: int) -> Any:
    from agentrl.config import RolloutConfig
    from agentrl.policy.transformers_policy import TransformersPolicy
    from agentrl.scaffolds.react import ReactScaffold
    from agentrl.testing import echo
    from agentrl.toolserver.app import create_app
    from agentrl.toolserver.client import ToolClient
    from agentrl.types import Task

    policy = TransformersPolicy(model.eval(), tokenizer, eos_token_ids=settings.eos_token_ids)
    policy.chat_settings = settings
    rollout = RolloutConfig(max_turns=2, max_new_tokens_per_turn=max_new_tokens, max_tokens_per_episode=4096)
    scaffold = ReactScaffold(tools=[echo], rollout=rollout)
    try:
        async with ToolClient(app=create_app([echo])) as tools:
            task = Task("doctor", "Echo the word ping, then say done.")
            return await scaffold.run(task, policy, tools, group_id="d", trajectory_id="d/0", seed=0)
    finally:
        await policy.aclose()


def _gaps(model: Any, trajectory: Any) -> list[float]:
    import torch

    from agentrl.train.losses import token_logprobs

    ids = torch.tensor([trajectory.token_ids], device=next(model.parameters()).device)
    with torch.no_grad():
        logits_B_T_V = model(input_ids=ids, use_cache=False).logits.float()
    learner_T1 = token_logprobs(logits_B_T_V[:, :-1], ids[:, 1:])[0].tolist()
    mask, sampler = trajectory.loss_mask, trajectory.sampler_logprobs
    return [abs(learner_T1[t - 1] - sampler[t]) for t in range(1, len(mask)) if mask[t]]
