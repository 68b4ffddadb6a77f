r"""LLM-as-judge rewards: a rubric, a model behind any OpenAI-compatible endpoint (or any litellm model), votes.

A judge is a subclass that sets a rubric (a `str.format` template over the reward inputs it names, or over
what its `fields()` returns) and a `parse` of the judge model's reply:

    class Helpful(Judge):
        inputs = ("task", "answer")
        rubric = "Question: {task.prompt}\nAnswer: {answer}\nHelpful? End with boxed{{1}} or boxed{{0}}."

        def parse(self, text):  # the default parse reads the last boxed{number}
            return 1.0 if "boxed{1}" in text else 0.0 if "boxed{0}" in text else None

    helpful = Helpful("openai/judge", base_url="http://127.0.0.1:8000/v1", votes=3)
    RewardStack([(helpful, 1.0)])           # or rewards=[mypkg.judges:helpful] from the CLI

Each item is judged `votes` times (concurrently, at most `concurrency` requests in flight per judge, each with
`timeout_s`); `aggregate` combines the parsed votes (mean by default). Identical prompts are answered from a
cache. A failed request or an unparsable reply is a lost vote, counted in `stats`; when no vote survives the
judge abstains (None) — a judge failure is never a score of 0. Plain sync or async functions stay rewards
through `agentrl.reward.reward`.

Where the endpoint is not given to the constructor it comes from the environment at call time:
`AGENTRL_JUDGE_MODEL`, `AGENTRL_JUDGE_BASE_URL`, `AGENTRL_JUDGE_API_KEY`.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentrl.errors import ConfigError
from agentrl.reward import TRAJECTORY_INPUTS, TURN_INPUTS, Reward

_BOXED = re.compile(r"\\boxed\{\s*([+-]?\d+(?:\.\d+)?)\s*\}")


def boxed_number(text: str) -> float | None:
    r"""The number in the last `\boxed{...}` of a reply, or None.

    >>> boxed_number(r"thinking ... \boxed{-1}")
    -1.0
    """
    found = _BOXED.findall(text)
    return float(found[-1]) if found else None


@dataclass
class JudgeStats:
    """What a judge did; failures and unparsable replies are lost votes, abstentions lost items."""

    items: int = 0
    requests: int = 0
    cache_hits: int = 0
    failures: int = 0
    """Requests that raised or timed out."""
    unparsable: int = 0
    abstained: int = 0
    """Items for which no vote survived (the reward abstained)."""
    seconds: float = 0.0
    """Wall time spent waiting for the judge model."""
    last_error: str = ""
    """What the latest failed request raised (the trainer names it when a whole step's requests failed)."""


class Judge:
    """Base class of LLM-as-judge rewards; see the module docstring."""

    rubric: str = ""
    """User message template; fields come from `fields()` (by default the reward inputs themselves)."""
    system: str | None = None
    """Optional system message."""
    inputs: tuple[str, ...] = ("task", "answer")
    """The reward inputs the judge needs (see `agentrl.reward`)."""
    level: str = "trajectory"
    """`trajectory` or `turn`."""

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        votes: int = 1,
        temperature: float = 0.0,
        max_tokens: int = 512,
        concurrency: int = 16,
        timeout_s: float = 60.0,
        cache: bool = True,
        name: str | None = None,
    ):
        allowed = TURN_INPUTS if self.level == "turn" else TRAJECTORY_INPUTS
        if unknown := [i for i in self.inputs if i not in allowed]:
            raise TypeError(f"{type(self).__name__} asks for unknown input(s) {unknown}")
        if votes < 1 or concurrency < 1:
            raise ConfigError("votes and concurrency must be >= 1")
        self.model, self.base_url, self.api_key = model, base_url, api_key
        self.votes, self.temperature, self.max_tokens = votes, temperature, max_tokens
        self.concurrency, self.timeout_s, self.cache_enabled = concurrency, timeout_s, cache
        self.name = name or _snake(type(self).__name__)
        self.stats = JudgeStats()
        self._cache: dict[str, float | None] = {}
        self._semaphore: tuple[Any, asyncio.Semaphore] | None = None

    # --- what subclasses define ------------------------------------------------------------------------------

    def fields(self, **inputs: Any) -> dict[str, Any] | None:
        """Template fields for one item; None abstains without asking the model."""
        return inputs

    def parse(self, text: str) -> float | None:
        """The score in one reply, or None when the reply has none."""
        return boxed_number(text)

    def aggregate(self, votes: Sequence[float]) -> float | None:
        """Combine the valid votes (at least one)."""
        return sum(votes) / len(votes)

    # --- the machinery ---------------------------------------------------------------------------------------

    def messages(self, **inputs: Any) -> list[dict[str, str]] | None:
        fields = self.fields(**inputs)
        if fields is None:
            return None
        user = {"role": "user", "content": self.rubric.format(**fields)}
        return [{"role": "system", "content": self.system}, user] if self.system else [user]

    def as_reward(self) -> Reward:
        return Reward(fn=self.judge, name=self.name, level=self.level, inputs=self.inputs)

    async def judge(self, **inputs: Any) -> float | None:
        """Score one item: the aggregate of its valid votes, or None."""
        messages = self.messages(**inputs)
        if messages is None:
            return None
        self.stats.items += 1
        key = json.dumps([self.endpoint(), self.votes, self.temperature, messages], sort_keys=True)
        if self.cache_enabled and key in self._cache:
            self.stats.cache_hits += 1
            return self._cache[key]
        replies = await asyncio.gather(*(self._ask(messages) for _ in range(self.votes)))
        votes = []
        for reply in replies:
            if reply is not None:
                value = self.parse(reply)
                if value is None:
                    self.stats.unparsable += 1
                else:
                    votes.append(value)
        if not votes:
            self.stats.abstained += 1
            return None  # not cached: a judge outage must not stick to the item
        score = self.aggregate(votes)
        if self.cache_enabled:
            self._cache[key] = score
        return score

    def endpoint(self) -> tuple[str, str | None, str | None]:
        """(litellm model name, base URL, API key), from the constructor or the environment; a judge without a
        model is a `ConfigError`."""
        model = self.model or os.environ.get("AGENTRL_JUDGE_MODEL")
        base_url = self.base_url or os.environ.get("AGENTRL_JUDGE_BASE_URL")
        api_key = self.api_key or os.environ.get("AGENTRL_JUDGE_API_KEY")
        if not model:
            raise ConfigError(f"judge {self.name} has no model: pass one or set AGENTRL_JUDGE_MODEL")
        if base_url and not model.startswith("openai/"):
            # litellm's OpenAI-compatible route; litellm strips `openai/` and the server gets the rest (`Org/Model`
            # included, which litellm would otherwise take for a provider)
            model = f"openai/{model}"
        return model, base_url, api_key

    async def _ask(self, messages: list[dict[str, str]]) -> str | None:
        """One vote's reply text; None (counted) when the request failed or timed out."""
        from agentrl.policy.chat_policy import import_litellm

        litellm = import_litellm()
        model, base_url, api_key = self.endpoint()
        loop = asyncio.get_running_loop()
        if self._semaphore is None or self._semaphore[0] is not loop:
            self._semaphore = (loop, asyncio.Semaphore(self.concurrency))
        async with self._semaphore[1]:
            self.stats.requests += 1
            started = loop.time()
            try:
                response = await asyncio.wait_for(
                    litellm.acompletion(
                        model=model,
                        messages=messages,
                        api_base=base_url,
                        api_key=api_key or ("none" if base_url else None),
                        temperature=self.temperature,
                        max_tokens=self.max_tokens,
                        num_retries=0,
                    ),
                    self.timeout_s,
                )
                return response.choices[0].message.content or ""
            except Exception as e:  # any judge failure is a lost vote, never an exception across the rollout loop
                self.stats.failures += 1
                self.stats.last_error = _short_error(e)
                return None
            finally:
                self.stats.seconds += loop.time() - started


def _short_error(error: BaseException) -> str:
    """`Type: first line of the message`, without litellm's provider prefixes and advice."""
    if isinstance(error, TimeoutError):
        return "timed out"
    name = type(error).__name__
    text = " ".join(str(error).split()).removeprefix("litellm.")
    while text.startswith(f"{name}: "):  # litellm repeats the type in its messages
        text = text[len(name) + 2 :]
    return f"{name}: {text[:160]}" if text else name


def majority(votes: Sequence[float]) -> float:
    """The most common vote; a tie between the most common values is 0 (OpenClaw-RL).

    >>> majority([1, 1, -1]), majority([1, -1]), majority([-1])
    (1.0, 0.0, -1.0)
    """
    counts: dict[float, int] = {}
    for v in votes:
        counts[float(v)] = counts.get(float(v), 0) + 1
    top = max(counts.values())
    winners = [v for v, c in counts.items() if c == top]
    return winners[0] if len(winners) == 1 else 0.0


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
