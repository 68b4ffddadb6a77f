"""Training: the learner and what it trains on.

`learner.py` is one GRPO-family update, `losses.py` the policy-gradient losses as pure tensor functions,
`samples.py` the per-token training samples and their padding, `checkpoint.py` resumable state, and `sft.py`
the supervised warm start.
"""
