"""Short names → dotted import paths, resolved lazily.

The core never imports the collections (`agentrl.tools`, `agentrl.scaffolds`, `agentrl.rewards`) at module
load; it looks names up here when a run needs them. Any string that is not a short name is treated as an
import path (`package.module:attr` or `package.module.attr`), so user code plugs in without registration.
"""

from __future__ import annotations

import copy
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agentrl.errors import ConfigError

SCAFFOLDS = {
    "react": "agentrl.scaffolds.react:ReactScaffold",
    "code": "agentrl.scaffolds.code:CodeScaffold",
    "search": "agentrl.scaffolds.search:SearchScaffold",
    "swe": "agentrl.scaffolds.swe:SweScaffold",
    "gui": "agentrl.scaffolds.gui:GuiScaffold",
    "gui_screenshot": "agentrl.scaffolds.gui:GuiScreenshotScaffold",
    "terminal": "agentrl.scaffolds.terminal:TerminalScaffold",
    "agent": "agentrl.scaffolds.agent:AgentScaffold",
}
REWARDS = {
    "exact_match": "agentrl.rewards.outcome:exact_match",
    "f1": "agentrl.rewards.outcome:token_f1",
    "tool_errors": "agentrl.rewards.format:tool_error_rate",
    "math_equiv": "agentrl.rewards.outcome:math_equivalence",
    "tests_pass": "agentrl.rewards.outcome:tests_pass_fraction",
    "tests_pass_all": "agentrl.rewards.outcome:tests_pass_all",
    "format": "agentrl.rewards.outcome:format_gate",
    "overlong": "agentrl.rewards.outcome:overlong",
    "info_gain": "agentrl.rewards.info_gain:info_gain",
    "info_gain_log": "agentrl.rewards.info_gain:info_gain_log",
    "judge_prm": "agentrl.rewards.judge_prm:judge_prm",
    "local_prm": "agentrl.rewards.local_prm:local_prm",
    "swe_resolved": "agentrl.scaffolds.swe.rewards:swe_resolved",
    "swe_similarity": "agentrl.scaffolds.swe.rewards:swe_similarity",
    "gui_check": "agentrl.scaffolds.gui.checker:gui_check",
    "terminal_check": "agentrl.scaffolds.terminal.checker:terminal_check",
}
REWARD_FILTERS = {
    "gra_gate": "agentrl.rewards.combinators:gra_gate",
    "prof": "agentrl.rewards.combinators:prof",
    "prof_correct": "agentrl.rewards.combinators:prof_correct",
    "roc": "agentrl.rewards.combinators:roc",
    "dynamic_sampling": "agentrl.rewards.combinators:dynamic_sampling",
}
TOOLSETS = {
    "code": "agentrl.tools.code:PythonInterpreter",
    "terminal": "agentrl.tools.terminal:Shell",
    "files": "agentrl.tools.files:FileEditor",
    "swe": "agentrl.tools.swe:SweTools",
    "search": "agentrl.tools.search:Search",
    "web_search": "agentrl.tools.search:WebSearch",
    "gui": "agentrl.tools.gui:Browser",
    "echo": "agentrl.testing:echo",
    "calculate": "agentrl.scaffolds.code.tools:calculate",
    "lookup": "agentrl.scaffolds.search.tools:lookup",
    "terminal_tasks": "agentrl.scaffolds.terminal.workspace:TaskWorkspace",
}
ADVANTAGES = "agentrl.credit.advantages:ADVANTAGE_ESTIMATORS"
LOSSES = "agentrl.train.losses:POLICY_LOSSES"
CREDIT = {
    "trajectory": "agentrl.credit.assign:trajectory_credit",
    "igpo": "agentrl.credit.igpo:igpo_credit",
    "gigpo": "agentrl.credit.gigpo:gigpo_credit",
    "hgpo": "agentrl.credit.gigpo:hgpo_credit",
}

_TABLES = {
    "scaffold": SCAFFOLDS,
    "reward": REWARDS,
    "toolset": TOOLSETS,
    "credit": CREDIT,
    "reward_filter": REWARD_FILTERS,
}


def import_path(path: str) -> Any:
    """Import `package.module:attr`, `package.module.attr` or a module `package.module`; a `ConfigError` says what
    could not be found."""
    if path.startswith("<python "):
        raise ConfigError(f"{path} was a Python object of a run started from Python: give it to the Trainer again")
    if ":" in path:
        module, _, attr = path.partition(":")
    else:
        try:
            return _import_module(path)
        except ModuleNotFoundError as e:
            if e.name != path:  # the module exists, but something it imports does not
                raise ConfigError(f"cannot import {path!r}: {e}") from e
        module, _, attr = path.rpartition(".")
    if not module or not attr:
        raise ConfigError(
            f"cannot import {path!r}: no module of that name in the working directory ({os.getcwd()}) or on the "
            "Python path (expected a module, package.module or package.module:name)"
        )
    try:
        obj = _import_module(module)
    except ImportError as e:
        raise ConfigError(f"cannot import {module!r} (from {path!r}): {e}") from e
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigError(f"{module!r} has no attribute {part!r} (from {path!r})") from None
    return obj


def _import_module(name: str) -> Any:
    """`importlib.import_module`, finding user modules in the working directory as `python -m` does: a module
    found nowhere else is looked for there (appended to `sys.path`, so it never shadows an installed package)."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        cwd = os.getcwd()
        top = name.partition(".")[0]
        if e.name not in (name, top) or cwd in sys.path or "" in sys.path:
            raise
        sys.path.append(cwd)
        importlib.invalidate_caches()
        return importlib.import_module(name)


def resolve(kind: str, name: str) -> Any:
    """Resolve a short name of `kind` (scaffold, reward, toolset, advantage, loss) or an import path."""
    if kind in ("advantage", "loss"):
        table = import_path(ADVANTAGES if kind == "advantage" else LOSSES)
        if name in table:
            return table[name]
        if "." not in name and ":" not in name:
            raise ConfigError(f"unknown {kind} {name!r}; known: {', '.join(sorted(table))}")
        return import_path(name)
    table = _TABLES[kind]
    if name in table:
        return import_path(table[name])
    if "." not in name and ":" not in name:
        raise ConfigError(f"unknown {kind} {name!r}; known: {', '.join(sorted(table))} (or give an import path)")
    return import_path(name)


def names(kind: str) -> list[str]:
    if kind in ("advantage", "loss"):
        return sorted(import_path(ADVANTAGES if kind == "advantage" else LOSSES))
    return sorted(_TABLES[kind])


def load_scaffold(name: str, rollout: Any = None) -> Any:
    """Instantiate a scaffold by name; `a+b` builds a mixture of the named scaffolds."""
    if "+" in name:
        from agentrl.scaffolds.mix import MixScaffold

        return MixScaffold([load_scaffold(part, rollout) for part in name.split("+")])
    factory = resolve("scaffold", name)
    return factory(rollout=rollout) if isinstance(factory, type) else factory


# --- a run's parts: from the config's names, or from Python objects ---------------------------------------


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


def build_rollouts(
    config: Any, scaffold: Any, eval_scaffold: Any, policy: Any, run_name: str, data_parallel: Any = None
) -> Any:
    """Where the run's episodes are played: rollout workers on a Ray cluster (`ray.enabled`, `agentrl train
    --ray`), else this process, with the tool backend `build_tool_client` names. Ranks of a multi-process run
    (`data_parallel`) each get their share of the groups (on Ray, rank 0 holds the workers)."""
    central = config.ray.enabled
    if central and (data_parallel is None or data_parallel.is_main):
        from agentrl.distributed.ray_rollouts import RayRollouts

        inner = RayRollouts(config, run_name)
    elif central:
        inner = None
    else:
        from agentrl.rollout.local_rollouts import LocalRollouts

        inner = LocalRollouts(config, scaffold, eval_scaffold, policy, build_tool_client(config, scaffold))
    if data_parallel is None or not data_parallel.enabled:
        return inner
    from agentrl.distributed.sharded_rollouts import ShardedRollouts

    return ShardedRollouts(inner, data_parallel, central=central)


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


def describe(obj: Any) -> str:
    """How a run's config.toml names a Python object: its import path when it has one, else `<python NAME>`; a
    name given as a string is kept."""
    if isinstance(obj, str):
        return obj
    module, name = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if module and name and module != "__main__" and "<" not in name:
        return f"{module}:{name}"
    return f"<python {name or type(obj).__name__}>"


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
