"""The `agentrl` command line, split by command family: `app.py` (train, eval, serve, ...), `bench.py`
(`agentrl bench …`) and `swe.py` (`agentrl swe …`)."""

from agentrl.cli.app import app, main

__all__ = ["app", "main"]
