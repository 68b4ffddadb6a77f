"""What a chat request's `tool_choice` asks of the turn, in the model's own tool-call format.

- `auto` (the default): the model decides; whatever calls it wrote are parsed.
- `required`, or `{"type": "function", "function": {"name": ...}}`: the turn must be a call. Its opening markup
  (`ToolCallFormat.forced_prefix`: `<tool_call>\\n` in Hermes, and `{"name": "f", "arguments": ` after it for a
  named function) is appended to the prompt, as guided decoding would constrain the first tokens; the model samples
  the rest (its arguments). For `required` over a policy that scores continuations (the in-process one), the call
  is opened up to its arguments like a named one, the tool drawn from the model's own probabilities of opening each
  tool's call (`pick`: a model that would rather answer still calls a tool it knows); over other policies only the
  opening markup is forced.
  The markup is forced up to its last token boundary in a whole call as the tokenizer writes it (`"arguments":`,
  not `"arguments": ` with a lone space token the model never saw; the model writes ` {` as it learned to). The
  forced ids are not sampled, so they are part of the prompt (or of the observation after the previous turn),
  outside the loss mask, with no log-probs. A generation prompt that opened a reasoning block gets it closed first.
  Once the tool is known, its arguments are sampled under constrained decoding where the policy can forbid ids
  (`forced_call.py`: JSON that fits the tool's schema, the closing markup, the end of the turn), and a forced call
  whose arguments do not fit its schema is never returned as `tool_calls` (`checked_call`).
- `none`: the turn may not call a tool. The tools stay in the prompt (the model knows them, as with OpenAI), and
  a policy that can constrain its sampling is kept from writing the format's call opening (`ForbiddenText`); the
  turn is returned as text either way, never parsed for calls.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentrl.rollout.chat import ChatFormat
from agentrl.serve.sampling import RequestError
from agentrl.serve.turn_stream import call_openings


@dataclass(frozen=True)
class ToolChoice:
    """A request's `tool_choice`, resolved against its tools and the model's format."""

    parse_tools: bool = True
    """Whether the turn is read for tool calls (not for `none`)."""
    forced: str = ""
    """Markup the turn is made to start with."""
    forced_ids: tuple[int, ...] = ()
    """Its ids (the prompt's last ids)."""
    forbidden: tuple[str, ...] = ()
    """Text the model may not write."""
    named: tuple[ToolChoice, ...] = ()
    """For `required`: the forcing of a call to each tool, one of which `pick` chooses."""
    name: str | None = None
    """The tool a call is forced to (a named choice, or the one `pick` chose): its arguments are constrained to
    its schema where the policy can constrain sampling (`forced_call.py`)."""
    markup: str = ""
    """The whole opening the forcing stands for; `forced` is its part up to the last token boundary."""


def tool_choice_of(value: Any, tools: list[dict[str, Any]] | None, chat: ChatFormat) -> ToolChoice:
    if value in (None, "auto"):
        return ToolChoice()
    if value == "none":
        return ToolChoice(parse_tools=False, forbidden=call_openings(chat.tool_format))
    if not tools:
        raise RequestError("tool_choice requires tools", param="tool_choice")
    known = [(t.get("function") or {}).get("name") for t in tools if isinstance(t, dict)]
    closing = f"{chat.reasoning.close}\n\n" if chat.reasoning is not None and chat.prompt_opens_reasoning else ""
    if value == "required":
        opening = _forcing(chat, closing, chat.tool_format.forced_prefix(), next((k for k in known if k), "f"))
        opening = dataclasses.replace(opening, name=None)  # the model names the tool: nothing to constrain yet
        named = tuple(_forcing(chat, closing, chat.tool_format.forced_prefix(k), k) for k in dict.fromkeys(known) if k)
        return dataclasses.replace(opening, named=named)
    function = value.get("function") if isinstance(value, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(name, str):
        raise RequestError(
            "tool_choice must be 'none', 'auto', 'required' or {'type': 'function', 'function': {'name': ...}}",
            param="tool_choice",
        )
    if name not in known:
        raise RequestError(f"tool_choice names {name!r}, which is not among the tools", param="tool_choice")
    return _forcing(chat, closing, chat.tool_format.forced_prefix(name), name)


def _forcing(chat: ChatFormat, closing: str, prefix: str, name: str) -> ToolChoice:
    """Force `closing + prefix` up to its last token boundary inside a whole call to `name` (all of it when no
    boundary lies inside)."""
    tokenizer, markup = chat.tokenizer, closing + prefix
    whole = chat.encode(closing + chat.tool_format.write(name, {"x": ""}))  # arguments as calls write them
    ids: list[int] = []
    for k in range(1, len(whole) + 1):
        if not markup.startswith(tokenizer.decode(whole[:k], skip_special_tokens=False)):
            break
        ids = whole[:k]
    if not ids:
        ids = chat.encode(markup)
    forced = tokenizer.decode(ids, skip_special_tokens=False)
    return ToolChoice(forced=forced, forced_ids=tuple(ids), name=name, markup=markup)


async def pick(choice: ToolChoice, policy: Any, prompt_ids: Sequence[int], *, temperature: float, seed: int | None):
    """The forcing to sample with: for `required` over a policy that scores continuations, a call to one tool,
    drawn with probability ∝ p(its opening)^(1/temperature) (the likeliest at temperature 0); else `choice`."""
    if not choice.named or not hasattr(policy, "score_continuations"):
        return choice
    if len(choice.named) == 1:
        return choice.named[0]
    continuations = [list(named.forced_ids) for named in choice.named]
    prefixes = [list(prompt_ids)] * len(continuations)
    scores = [sum(lp) for lp in await policy.score_continuations(prefixes, continuations)]
    if temperature <= 0:
        return choice.named[scores.index(max(scores))]
    top = max(scores)
    weights = [math.exp((s - top) / temperature) for s in scores]
    return random.Random(seed).choices(choice.named, weights)[0]
