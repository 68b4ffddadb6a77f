"""`python -m agentrl …`: the `agentrl` command (for launchers that start modules, such as `accelerate launch -m`)."""

from agentrl.cli import main

main()
