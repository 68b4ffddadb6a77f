"""A local process reward model: the probability that each turn is a correct step, from a transformers model.

Two kinds of model:

- `generative`: a causal LM asked "is this step correct?"; the score is P(good) / (P(good) + P(bad)) of the
  next token (the first tokens of `good_word` and `bad_word`), the usual way to use an instruction model as a
  PRM without training a head;
- `classifier`: a sequence classifier (a PRM with a classification head); the score is the softmax probability
  of label `positive_label`.

The turns of all trajectories scored concurrently go through shared batched forwards (chunks of
`max_batch_size` rows), off the event loop.
Scores are probabilities in [0, 1], PROF's p_{i,k}; use `ProfFilter(process="local_prm")` to filter with them
rather than adding them to the objective, which PROF found open to reward hacking.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal

from agentrl.rewards.judge_prm import render_action, render_next_state

from agentrl.policy.request_merger import RequestMerger
from agentrl.reward import Reward
from agentrl.types import Task, Trajectory, Turn

TEMPLATE = """Task: {task}
Step: {action}
Result: {next_state}
Is this step correct? Answer:"""


@dataclass
class PRMStats:
    forwards: int = 0
    rows: int = 0
    seconds: float = 0.0


class LocalPRM:
    """Step-correctness probabilities for every turn from a local model; see the module docstring."""

    def __init__(
        self,
        model_path: str,
        *,
        kind: Literal["generative", "classifier"] = "generative",
        template: str = TEMPLATE,
        good_word: str = " good",
        bad_word: str = " bad",
        positive_label: int = 1,
        max_batch_size: int = 32,
        batch_wait_ms: float = 5.0,
        max_state_chars: int = 1000,
        device: str = "auto",
        name: str = "local_prm",
    ):
        if kind not in ("generative", "classifier"):
            raise ValueError(f"kind must be generative or classifier, not {kind!r}")
        self.model_path, self.kind, self.template = model_path, kind, template
        self.good_word, self.bad_word, self.positive_label = good_word, bad_word, positive_label
        self.max_batch_size, self.max_state_chars, self.device, self.name = (
            max_batch_size,
            max_state_chars,
            device,
            name,
        )
        self.batch_wait_s = batch_wait_ms / 1000
        self.stats = PRMStats()
        self._model: Any = None
        self._tokenizer: Any = None
        self._batches = RequestMerger(self.score_texts, self.batch_wait_s)

    def as_reward(self) -> Reward:
        return Reward(fn=self.turn_values, name=self.name, level="turns", inputs=("task", "trajectory"))

    def prompt(self, task: Task, turn: Turn) -> str:
        next_state = render_next_state(turn, self.max_state_chars) or "(none: this step ended the episode)"
        return self.template.format(task=task.prompt, action=render_action(turn), next_state=next_state)

    async def turn_values(self, task: Task, trajectory: Trajectory) -> list[float] | None:
        if not trajectory.turns:
            return None
        # concurrently scored trajectories share forward passes
        return await self._batches.submit([self.prompt(task, turn) for turn in trajectory.turns])

    def score_texts(self, texts: list[str]) -> list[float]:
        """P(correct) for each text, batched."""
        import torch

        model, tokenizer = self._load()
        started = time.perf_counter()
        out: list[float] = []
        for i in range(0, len(texts), self.max_batch_size):
            chunk = texts[i : i + self.max_batch_size]
            batch = tokenizer(chunk, return_tensors="pt", padding=True, add_special_tokens=False)
            batch = {k: v.to(model.device) for k, v in batch.items()}
            with torch.inference_mode():
                logits = model(**batch).logits.float()
            if self.kind == "classifier":
                out += torch.softmax(logits, dim=-1)[:, self.positive_label].tolist()
            else:
                last_B = batch["attention_mask"].sum(dim=1) - 1  # right padding: the last real token per row
                logits_B_V = logits[torch.arange(len(chunk)), last_B]
                pair_B_2 = torch.log_softmax(logits_B_V, dim=-1)[:, self._word_ids]
                out += torch.softmax(pair_B_2, dim=-1)[:, 0].tolist()
            self.stats.forwards += 1
        self.stats.rows += len(texts)
        self.stats.seconds += time.perf_counter() - started
        return out

    def _load(self) -> tuple[Any, Any]:
        if self._model is None:
            import torch
            from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification

            from agentrl.policy import resolve_model_path
            from agentrl.policy.loading import load_tokenizer

            path = resolve_model_path(self.model_path)
            tokenizer = load_tokenizer(path)  # keeps tokenizer.json's pre-tokenizer, as the policy's loader does
            tokenizer.padding_side = "right"
            if tokenizer.pad_token is None:
                tokenizer.pad_token = tokenizer.eos_token
            auto = AutoModelForCausalLM if self.kind == "generative" else AutoModelForSequenceClassification
            device = ("cuda" if torch.cuda.is_available() else "cpu") if self.device == "auto" else self.device
            model = auto.from_pretrained(path).to(device).eval()
            if self.kind == "classifier" and model.config.pad_token_id is None:
                model.config.pad_token_id = tokenizer.pad_token_id
            good = tokenizer.encode(self.good_word, add_special_tokens=False)
            bad = tokenizer.encode(self.bad_word, add_special_tokens=False)
            if not good or not bad or good[0] == bad[0]:
                raise ValueError(f"{self.good_word!r} and {self.bad_word!r} need distinct first tokens")
            self._word_ids = [good[0], bad[0]]
            self._model, self._tokenizer = model, tokenizer
        return self._model, self._tokenizer


local_prm = LocalPRM("tiny")
"""The registered instance scores with the shipped tiny policy (a stand-in: build your own with a real PRM)."""
