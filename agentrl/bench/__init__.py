"""Benchmarks behind `agentrl bench ...`: each prints JSON, with its baseline measured in the same run."""
