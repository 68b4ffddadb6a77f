"""`agentrl serve`: an OpenAI-compatible server over a local checkpoint, and the recording gateway.

- `app.py`: the FastAPI app (routes, sessions, rewards) and `serve_model`, the command's body;
- `chat_completions.py`: chat and token-id completions, token-exact with the training chat template;
- `streaming.py`: server-sent events, token by token: `detokenizer.py` (stable text of growing ids) and
  `turn_stream.py` (what of a turn is certain to show: reasoning, content, then its tool calls);
- `tool_choice.py`: `auto`, `none` (`forbidden_text.py`: token bans), `required` and named calls forced;
- `logprobs.py`: per-token log-probs and `top_logprobs`; `completions.py`: `/v1/completions` over token ids;
- `recorder.py`: gateway sessions recorded as token-exact trajectories, with mismatch detection;
- `recorded_sessions.py`: a recording read back, and as a task source; `recorded.py`: recorded sessions →
  trajectory groups → a learner step;
- `weights.py`: weight updates pushed by a trainer (`/admin/weights`), applied between requests (`sampling_gate.py`).
"""
