"""Rollouts: from tasks to trajectory groups.

`collect.py` runs every trajectory as its own asyncio task (branching forks included), `partial.py` carries
unfinished groups into the next step, `episode_clock.py` times each episode, `branching.py` decides where
ARPO/AEPO fork, and `chat.py` is the chat-template plumbing that keeps trajectories token-exact.
"""
