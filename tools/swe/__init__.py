"""The SWE toolset: the episode's repository setup (hidden from the model), `run_tests` and `submit`."""

from agentrl.tools.swe.swe_tools import SweTools

__all__ = ["SweTools"]
