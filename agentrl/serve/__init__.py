"""`agentrl serve`: an OpenAI-compatible server over a local checkpoint, and the recording gateway.

- `app.py`: the FastAPI app (routes, sessions, rewards) and `serve_model`, the command's body;
- `chat_completions.py`: chat and token-id completions, token-exact with the training chat template;
- `streaming.py`: server-sent events;
- `recorder.py`: gateway sessions recorded as token-exact trajectories, with mismatch detection;
- `recorded.py`: recorded sessions → trajectory groups → a learner step;
- `weights.py`: weight updates pushed by a trainer (`/admin/weights`), applied between requests (`sampling_gate.py`).
"""
