"""Built-in toolsets (installed as `agentrl.tools`). Short names are in `agentrl/registry.py` (`TOOLSETS`);
serve them with `agentrl serve-tools --tools NAME,...`."""
