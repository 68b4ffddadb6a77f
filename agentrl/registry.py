"""Short names → dotted import paths, resolved lazily.

The core never imports the collections (`agentrl.tools`, `agentrl.scaffolds`, `agentrl.rewards`) at module
load; it looks names up here when a run needs them. Any string that is not a short name is treated as an
import path (`package.module:attr` or `package.module.attr`), so user code plugs in without registration.

This module imports nothing of agentrl but its errors, so every room may read it; what builds a run's parts from
these names (its scaffold, tool backend, rewards) is `agentrl/builders.py`.
"""

from __future__ import annotations

import importlib
import os
import sys
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


def describe(obj: Any) -> str:
    """How a run's config.toml names a Python object: its import path when it has one, else `<python NAME>`; a
    name given as a string is kept."""
    if isinstance(obj, str):
        return obj
    module, name = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if module and name and module != "__main__" and "<" not in name:
        return f"{module}:{name}"
    return f"<python {name or type(obj).__name__}>"
