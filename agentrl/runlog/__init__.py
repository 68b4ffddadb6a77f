"""What a run leaves behind: `metrics.jsonl` and TensorBoard (`metrics.py`), the console progress
(`progress.py`), plots (`plots.py`) and the end-of-run summary (`report.py`)."""
