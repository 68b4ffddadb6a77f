"""`doctor(policy_config)`: every check of a model before a run, as a list of verdicts.

The fast checks read the tokenizer and the generation config (`chat_checks`); unless `fast`, the model is loaded
and samples one short episode (`sampler_check`). `agentrl train` runs the fast ones before it loads weights and
stops on a failure with the table (`require_chat_format`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from agentrl.doctor.chat_checks import chat_checks
from agentrl.doctor.policy_chat import policy_chat, tokenizer_and_settings
from agentrl.doctor.tool_visibility import FIX, OVERRIDE, tool_visibility
from agentrl.doctor.verdicts import Verdict, failed, table
from agentrl.errors import ConfigError
from agentrl.policy.config import PolicyConfig


def doctor(config: PolicyConfig, *, fast: bool = False, tools: Sequence[dict[str, Any]] = ()) -> list[Verdict]:
    """The verdicts of every check of `config.model` under `config`'s chat settings; `tools` (OpenAI function-tool
    schemas) are the tools a run would offer it, checked for whether it can see them."""
    tokenizer, settings = tokenizer_and_settings(config)
    verdicts = chat_checks(tokenizer, settings)
    if not failed(verdicts):
        verdicts.append(tool_schemas_verdict(config, tools))
    if fast or failed(verdicts):
        return verdicts
    from agentrl.doctor.sampler_check import sampler_check
    from agentrl.errors import DependencyError
    from agentrl.policy import load_model_and_tokenizer
    from agentrl.policy.loading import check_architecture
    from agentrl.policy.vllm_environment import check_gpu_companions

    try:  # torchvision & co. built for another torch break transformers' model imports with a traceback
        check_gpu_companions()
    except DependencyError as e:
        detail, _, fix = str(e).partition("; vLLM's text models need none of them: ")
        return [*verdicts, Verdict("torch companions", "fail", detail, fix)]

    try:
        check_architecture(config)
    except ConfigError as e:  # the in-process sampler cannot run this model: no weights to load, nothing to measure
        return [*verdicts, Verdict("sampler agreement", "warn", f"not measured: {e}")]
    model, tokenizer = load_model_and_tokenizer(config, trainable=False)
    return verdicts + sampler_check(model, tokenizer, settings)


def require_chat_format(config: PolicyConfig) -> None:
    """Raise `ConfigError` (after printing the table to stderr) when a fast check fails."""
    verdicts = doctor(config, fast=True)
    if failures := failed(verdicts):
        print(table(verdicts), file=sys.stderr)
        first = failures[0]
        fix = f"; fix: {first.fix}" if first.fix else ""
        raise ConfigError(f"{config.model}'s chat format fails `agentrl doctor` ({first.check}: {first.detail}){fix}")


def tool_schemas_verdict(config: PolicyConfig, tools: Sequence[dict[str, Any]]) -> Verdict:
    """Whether the template shows the policy its tools, and else which tools it learned (and of `tools`, which it
    cannot see)."""
    seen = tool_visibility(*policy_chat(config), tools)
    if seen.renders_schemas:
        return Verdict("visible tools", "ok", "the template renders the tools' schemas into the prompt")
    if not tools:
        detail = f"the template renders no tool schemas: the policy {seen.describe_trained()} and calls only those"
        return Verdict("visible tools", "warn", detail, f"for other tools: {FIX}")
    if not seen.unseen:
        detail = f"the template renders no tool schemas; the policy learned these tools ({seen.learned()})"
        return Verdict("visible tools", "ok", detail)
    detail = f"the template renders no tool schemas and the policy {seen.describe_trained()}: it cannot see " + (
        ", ".join(seen.unseen)
    )
    status = "fail" if seen.blind else "warn"
    return Verdict("visible tools", status, detail, f"{FIX} (or train anyway with {OVERRIDE})")
