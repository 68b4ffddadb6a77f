"""Built-in rewards (installed as `agentrl.rewards`). Each is an `agentrl.reward.Reward`; see the registry in
`agentrl/registry.py` for their short names."""
