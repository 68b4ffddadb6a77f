"""Credit assignment: scored trajectory groups → per-token advantages.

`assign.py` is the phase the trainer calls; `advantages.py` holds the group-relative estimators (GRPO, Dr. GRPO,
RLOO, ...), `igpo.py` IGPO turn-level credit, `gigpo.py` GiGPO/HGPO step-group credit, `branches.py` the
attribution of shared turns between a branch and its parent, and `scored_turns.py` the per-turn tensors they
read.
"""
