"""A run's parts, built from its config's names or from Python objects: the scaffold (`build_scaffold`), the tool
backend (`build_tool_client`), the reward stack (`build_rewards`) and a task source (`as_task_source`).

Names are looked up in `agentrl/registry.py`. The trainer builds its parts here, and so does each rollout worker and
tool-server actor of a Ray run (`agentrl/distributed/`), from the config alone; where a run's episodes are played is
`agentrl/distributed/rollouts.py`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agentrl.errors import ConfigError
from agentrl.registry import TOOLSETS, import_path, load_scaffold


def build_scaffold(
    config: Any, rollout: Any, *, scaffold: Any = None, tools: Sequence[Any] = (), tasks: Any = None
) -> Any:
    """The run's scaffold, sampling with `rollout`.

    A scaffold object is used as given (a copy of it carrying `rollout`, when it has a `rollout` attribute, so
    that it samples as the learner scores). Tools or tasks, as objects or in the config (`tools`, `tasks`,
    `system_prompt`), configure the generic `react` scaffold. Otherwise the scaffold the config names.
    """
    if scaffold is not None:
        if tools or tasks is not None:
            raise ConfigError("give the tools and tasks to the scaffold object itself, or give no scaffold")
        return _with_rollout(scaffold, rollout)
    if config.scaffold == "agent" or config.agent:
        from agentrl.scaffolds.agent import AgentScaffold

        return AgentScaffold.from_config(config, rollout)
    tool_specs = [_toolset(t) if isinstance(t, str) else t for t in tools] or [_toolset(s) for s in config.tools]
    if not (tool_specs or tasks is not None or config.tasks or config.system_prompt):
        return load_scaffold(config.scaffold, rollout)
    if config.scaffold != "react":
        raise ConfigError("tools, tasks and system_prompt configure the react scaffold; set scaffold=react")
    from agentrl.scaffolds.react import DEFAULT_SYSTEM_PROMPT, ReactScaffold
    from agentrl.tasks import task_source

    return ReactScaffold(
        tools=tool_specs,
        tasks=as_task_source(tasks) if tasks is not None else task_source(config.tasks) if config.tasks else None,
        system_prompt=config.system_prompt or DEFAULT_SYSTEM_PROMPT,
        rewards=config.rewards or ("exact_match",),
        rollout=rollout,
    )


def build_tool_client(config: Any, scaffold: Any) -> Any:
    """The run's tool backend: a client of `config.tool_servers` when set, else an in-process tool server holding
    the scaffold's toolsets, called directly (`LocalToolClient`: the same sessions, without HTTP in between)."""
    if config.tool_servers:
        from agentrl.toolserver.client import ToolClient

        return ToolClient(list(config.tool_servers), token=config.tool_server_token)
    from agentrl.toolserver.local_client import LocalToolClient
    from agentrl.toolserver.sessions import ToolSessions

    return LocalToolClient(ToolSessions(list(scaffold.toolsets()), config.tool_server))


def build_rewards(specs: Sequence[str], rewards: Sequence[Any] = ()) -> Any:
    """The reward stack: reward objects (or `(reward, weight)` pairs, or names) when given, else `specs`."""
    from agentrl.reward import RewardStack

    if not rewards:
        return RewardStack.from_specs(specs)
    components = []
    for item in rewards:
        reward, weight = item if isinstance(item, tuple) else (item, 1.0)
        if isinstance(reward, str):
            components.extend(RewardStack.from_specs([reward]).components)
        else:
            components.append((reward, weight))
    return RewardStack(components)


def as_task_source(tasks: Any) -> Callable[[str], list[Any]]:
    """A `split -> tasks` function from a task source (a file, a directory, a dataset id, a `TaskSourceConfig`),
    a list of `Task`s or of dicts read as a task file's rows (`prompt` or `messages`, optional `answer`, `id`,
    `split`; other keys go to `metadata`), or such a function itself."""
    from agentrl.tasks import TaskSourceConfig, task_source, tasks_from_rows

    if isinstance(tasks, (str, Path, TaskSourceConfig)):
        return task_source(tasks)
    if callable(tasks):
        return tasks
    made = tasks_from_rows(list(tasks))
    return lambda split: [t for t in made if t.split == split]


def _toolset(spec: str) -> Any:
    """A toolset named in the config: `mcp:COMMAND` / `mcp:URL` (an MCP server's tools), a short name or an
    import path."""
    if spec.startswith("mcp:"):
        from agentrl.toolserver.mcp_toolset import toolset_from_spec

        return toolset_from_spec(spec)
    return import_path(TOOLSETS.get(spec, spec))


def _with_rollout(scaffold: Any, rollout: Any) -> Any:
    if rollout is None or not hasattr(scaffold, "rollout"):
        return scaffold
    copied = copy.copy(scaffold)
    copied.rollout = rollout
    return copied
