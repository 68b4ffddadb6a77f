"""Checks before a run: the environment a run needs (`preflight.py`: sandbox, browser, tool servers, policy
backend) and a model's chat template, tool-call format, end-of-turn ids and sampler agreement
(`agentrl doctor`)."""
