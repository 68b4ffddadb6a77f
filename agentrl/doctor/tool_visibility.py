"""Can the policy see the episode's tools? A chat template that renders no tool schemas leaves a policy only the
tools it learned from demonstrations.

The shipped tiny policies are such policies: their template starts with `{%- set tools = none %}` (short prompts
are most of RL's cost on a CPU), and they call the tools their demonstrations called, with the arguments those
calls used. A checkpoint records what it learned in its `config.json` under `agentrl_trained_tools` (tool name →
argument names), written by the tiny-policy build and extended by `agentrl sft` with the calls of its
demonstrations; it travels with every checkpoint saved from the model.

`tool_visibility` compares the episode's tool schemas with both: a tool is visible when the template renders its
schema into the prompt, or when the policy learned a tool of that name whose required arguments it learned too.
A run whose policy sees none of its tools would only ever score the reward's floor; `agentrl train` refuses it
(`policy.allow_unseen_tools=true` overrides), warns when some tools are unseen, and `agentrl doctor` reports it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

TRAINED_TOOLS_KEY = "agentrl_trained_tools"
"""The `config.json` key of the tools a checkpoint learned from demonstrations: {name: [argument names]}."""
OVERRIDE = "policy.allow_unseen_tools=true"
_PROBE = "agentrlvisibilityprobe"


@dataclass(frozen=True)
class ToolVisibility:
    """Which of the episode's tools the policy can call knowingly."""

    renders_schemas: bool
    """Whether the chat template puts tool schemas into the prompt."""
    trained: dict[str, tuple[str, ...]]
    """The tools the checkpoint learned from demonstrations, with their argument names."""
    unseen: tuple[str, ...]
    """The episode's tools the policy can neither read nor has learned."""
    offered: tuple[str, ...]

    @property
    def blind(self) -> bool:
        """Every tool of the episode is unseen: the policy cannot call any of them."""
        return bool(self.offered) and len(self.unseen) == len(self.offered)

    def describe_trained(self) -> str:
        if not self.trained:
            return "learned no tools from demonstrations"
        return f"learned only {self.learned()} from demonstrations"

    def learned(self) -> str:
        return ", ".join(f"{name}({', '.join(args)})" for name, args in sorted(self.trained.items()))

    def message(self, model: str) -> str:
        """One line: what the policy cannot see, why, and what to do."""
        return (
            f"the policy ({model}) cannot see the tools {', '.join(self.unseen)}: its chat template renders no tool "
            f"schemas and it {self.describe_trained()}, so it will not call them. {FIX}; to train anyway (a system "
            f"prompt that describes them, say) set {OVERRIDE}"
        )


FIX = (
    "Train a model whose template renders tools (e.g. --model Qwen/Qwen2.5-0.5B-Instruct), or teach it these tools "
    "first with `agentrl sft --data demonstrations.jsonl`"
)


def tool_visibility(
    tokenizer: Any, settings: Any, model_config: Any, schemas: Sequence[Mapping[str, Any]]
) -> ToolVisibility:
    """How the episode's tools (`schemas`, OpenAI function-tool schemas) reach the policy."""
    renders = renders_tool_schemas(tokenizer, settings)
    trained = trained_tools(model_config)
    offered, unseen = [], []
    for schema in schemas:
        function = schema.get("function", schema)
        name = str(function.get("name"))
        offered.append(name)
        if renders:
            continue
        required = set((function.get("parameters") or {}).get("required") or ())
        if name not in trained or not required <= set(trained[name]):
            unseen.append(name)
    return ToolVisibility(renders, trained, tuple(unseen), tuple(offered))


def renders_tool_schemas(tokenizer: Any, settings: Any = None) -> bool:
    """Whether the template writes a tool's schema into the prompt (a template that raises renders none)."""
    from agentrl.rollout.chat import ChatFormat

    probe = {
        "type": "function",
        "function": {
            "name": _PROBE,
            "description": f"{_PROBE} description",
            "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        },
    }
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    try:
        text = ChatFormat(tokenizer, [probe], settings).render(messages, add_generation_prompt=True)
    except Exception:  # noqa: BLE001 - a broken template is the chat checks' finding, not this one's
        return False
    return _PROBE in text


def trained_tools(model_config: Any) -> dict[str, tuple[str, ...]]:
    """The checkpoint's record of the tools it learned (empty when it keeps none)."""
    record = getattr(model_config, TRAINED_TOOLS_KEY, None) if model_config is not None else None
    if not isinstance(record, Mapping):
        return {}
    return {str(name): tuple(str(a) for a in args or ()) for name, args in record.items()}


def called_tools(conversations: Iterable[Sequence[Mapping[str, Any]]]) -> dict[str, list[str]]:
    """The tools the assistant turns of `conversations` call, with every argument name they pass."""
    found: dict[str, set[str]] = {}
    for messages in conversations:
        for message in messages:
            if message.get("role") != "assistant":
                continue
            for call in message.get("tool_calls") or ():
                function = call.get("function", call)
                arguments = function.get("arguments") or {}
                if isinstance(arguments, str):
                    try:
                        arguments = json.loads(arguments)
                    except json.JSONDecodeError:
                        arguments = {}
                names = arguments if isinstance(arguments, Mapping) else {}
                found.setdefault(str(function.get("name")), set()).update(str(k) for k in names)
    return {name: sorted(args) for name, args in sorted(found.items())}


def record_trained_tools(model_config: Any, tools: Mapping[str, Sequence[str]]) -> None:
    """Add `tools` to the checkpoint's record (saved with its config.json)."""
    merged = {name: set(args) for name, args in trained_tools(model_config).items()}
    for name, args in tools.items():
        merged.setdefault(name, set()).update(args)
    setattr(model_config, TRAINED_TOOLS_KEY, {name: sorted(args) for name, args in sorted(merged.items())})


def scaffold_tool_schemas(scaffold: Any, toolsets: Sequence[Any]) -> list[dict[str, Any]]:
    """The schemas of the tools the scaffold offers the policy (its `tool_names()`, else every tool)."""
    schemas = {name: tool.schema for toolset in toolsets for name, tool in toolset.tools.items()}
    offered = getattr(scaffold, "tool_names", None)
    names = offered() if callable(offered) else None
    return [schemas[name] for name in (names if names is not None else schemas) if name in schemas]


def check_tool_visibility(policy: Any, scaffold: Any) -> None:
    """Before a run's model loads: raise `ConfigError` when the policy can see none of the scaffold's tools (unless
    `policy.allow_unseen_tools`), and print a warning when it cannot see some of them."""
    import sys

    from agentrl.doctor.policy_chat import policy_chat
    from agentrl.errors import ConfigError
    from agentrl.toolserver.toolsets import resolve_toolsets

    schemas = scaffold_tool_schemas(scaffold, resolve_toolsets(list(scaffold.toolsets())))
    if not schemas:
        return
    seen = tool_visibility(*policy_chat(policy), schemas)
    if not seen.unseen:
        return
    if seen.blind and not policy.allow_unseen_tools:
        raise ConfigError(seen.message(policy.model))
    print(f"warning: {seen.message(policy.model)}", file=sys.stderr)
