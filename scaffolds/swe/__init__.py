"""The SWE scaffold: fix an issue in a repository; hidden tests grade the diff (see `scaffold.py`)."""

from agentrl.scaffolds.swe.scaffold import SweScaffold

__all__ = ["SweScaffold"]
