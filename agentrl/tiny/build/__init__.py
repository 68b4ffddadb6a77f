"""Everything that builds the shipped tiny policies, in one place.

`python -m agentrl.tiny.build` runs the stages (`stages.py`) over the conversations `data.py` draws: the
scaffolds' scripted experts, echo drills (`copy_drills.py`) and synthetic easy-tier drills of the GUI
(`gui_drills.py`, `gui_pages.py`) and SWE scaffolds (`swe_drills.py`, `swe_expressions.py`, `swe_mutations.py`,
`swe_code_drills.py`), mixed in the passes of `passes.py`. `swe_drill_tasks.py` writes drills as SWE training
tasks and `swe_copy_report.py` judges a SWE checkpoint's greedy fixes.

This package reads the scaffolds (their tasks, experts and prompts) to make training data, so unlike the rest of
`agentrl/` it imports the collections; nothing outside it imports it.
"""
