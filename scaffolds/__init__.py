"""Built-in scaffolds (installed as `agentrl.scaffolds`): `react` (generic), `code`, `search`, and mixtures
(`code+search`). Short names live in `agentrl/registry.py`."""
