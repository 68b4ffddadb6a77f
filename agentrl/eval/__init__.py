"""`agentrl eval`: a scaffold's tasks against any OpenAI-compatible endpoint or a local checkpoint.

- `runner.py`: transports, bounded concurrency, resumable runs (`evaluate`, `run_eval`);
- `chat_episode.py`: episodes over chat completions with native tool calls;
- `passk.py`: the unbiased pass@k estimator;
- `results.py`: the results JSONL (`EvalRecord`, `ResultsStore`);
- `outcomes.py`: success over valid episodes with the infrastructure failures beside it, per scaffold (shared
  with `Trainer.evaluate`);
- `summary.py`: the summary table and plot.
"""
