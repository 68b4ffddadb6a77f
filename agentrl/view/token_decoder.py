"""`TokenDecoder`: token ids of a run back to text, with the run's own `tokenizer.json`.

Trajectory files hold token ids, not text, so the prompt as the model saw it, each sampled token and each tool
result as it was appended are decoded here. The tokenizer is the run's own: the newest checkpoint's
(`checkpoints/step_*/policy/tokenizer.json`), else that of the model the config names (the shipped tiny policies,
a local directory, or a hub id already in the local cache; nothing is downloaded). Only the `tokenizers` library
is loaded, not transformers, so opening a run stays quick. A run whose tokenizer is nowhere to be found is shown
by its messages and token ids (`TokenDecoder.reason` says why).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any


class TokenDecoder:
    """Decodes ids with one `tokenizers.Tokenizer`; single tokens are cached, so long trajectories decode fast."""

    def __init__(self, tokenizer: Any = None, source: str | None = None, reason: str | None = None) -> None:
        self.tokenizer = tokenizer
        self.source = source
        """Where the tokenizer came from (shown on the page)."""
        self.reason = reason
        """Why there is no tokenizer, when there is none."""
        self._pieces: dict[int, str] = {}
        self._lock = threading.Lock()

    @classmethod
    def for_run(cls, run_dir: Path, model: str | None) -> TokenDecoder:
        """The newest checkpoint's tokenizer, else the configured model's (see the module docstring)."""
        candidates = sorted((run_dir / "checkpoints").glob("step_*/policy/tokenizer.json"), reverse=True)
        if model:
            candidates.append(_model_tokenizer_file(model))
        reason = f"no tokenizer.json in the run's checkpoints, nor for the model {model!r} in the local cache"
        for path in candidates:
            if path is not None and path.is_file():
                try:
                    from tokenizers import Tokenizer

                    return cls(Tokenizer.from_file(str(path)), source=_shown(path, run_dir))
                except Exception as e:  # a file this tokenizers version cannot read: try the next one
                    reason = f"{path}: {e}"
        return cls(reason=reason)

    @property
    def available(self) -> bool:
        return self.tokenizer is not None

    @property
    def vocab_size(self) -> int | None:
        """|V| with added tokens, as `len(tokenizer)` counts it (the branching rule's ln|V|)."""
        return self.tokenizer.get_vocab_size(with_added_tokens=True) if self.available else None

    def text(self, ids: list[int]) -> str | None:
        """The text of `ids`, special tokens included (None without a tokenizer)."""
        return self.tokenizer.decode(ids, skip_special_tokens=False) if self.available else None

    def pieces(self, ids: list[int]) -> list[str]:
        """Each token's own text (a token that is part of a multi-byte character shows as U+FFFD); without a
        tokenizer, the ids."""
        if not self.available:
            return [f"[{i}]" for i in ids]
        with self._lock:
            for i in set(ids) - self._pieces.keys():
                self._pieces[i] = self.tokenizer.decode([i], skip_special_tokens=False)
            return [self._pieces[i] for i in ids]


def _model_tokenizer_file(model: str) -> Path | None:
    """The tokenizer.json of a model name as `policy.model` takes it, without touching the network."""
    from agentrl.tiny import SHIPPED

    if model in SHIPPED:
        return SHIPPED[model] / "tokenizer.json"
    if Path(model).is_dir():
        return Path(model) / "tokenizer.json"
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(model, "tokenizer.json")
    except Exception:  # not a hub id either
        return None
    return Path(cached) if isinstance(cached, str) else None


def _shown(path: Path, run_dir: Path) -> str:
    try:
        return str(path.relative_to(run_dir))
    except ValueError:
        return str(path)
