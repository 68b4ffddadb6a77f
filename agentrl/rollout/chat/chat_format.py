"""`ChatFormat`: a policy's chat template, tool-call format, reasoning markers and end-of-turn ids, as the rollout
uses them to stay token-exact.

Three jobs: render the opening prompt to ids; turn the messages appended after a sampled turn (tool results, a
correction) into the exact ids that follow the sampled tokens; and read a sampled turn (reasoning, answer, tool
calls) without ever raising.

**Observation ids are rendered against the sampled prefix.** Many real templates are not prefix-preserving:
Qwen3 drops the reasoning of assistant turns before the last user message and adds an empty think block to a
final assistant turn, Llama 3.1 renders only the call of a turn that calls a tool. Re-rendering the history and
taking a text difference then fails or yields ids the policy never saw. Instead, the history is rendered with its
last assistant turn replaced by a stub whose text and tool names carry a sentinel; the ids that follow a sampled
turn are what the template writes after that turn's end-of-turn token (the rest of its closing markup, the new
messages, the next generation prompt), tokenized on their own. The text after a special token cannot merge with
what precedes it, so the trajectory's ids are exactly the sampled ids plus the template's rendering of each
observation, and the learner trains on the context the policy saw. For a prefix-preserving template this equals
the full re-rendering (`template_mismatch` checks); for the others, the recorded messages re-render differently
by design of their template.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentrl.errors import ConfigError
from agentrl.rollout.chat.reasoning import ReasoningMarkers
from agentrl.rollout.chat.tool_call_format import ParsedTurn, ToolCallFormat
from agentrl.rollout.chat.tool_formats import FORMATS, detect
from agentrl.types import Trajectory

_SENTINEL = "AGENTRLSAMPLEDTURN"


@dataclass(frozen=True)
class ChatSettings:
    """How a policy's turns are rendered and read, beyond what its tokenizer says (`build_policy` fills them in
    from `PolicyConfig`; a policy without them uses the tokenizer's own template and end-of-turn token)."""

    tool_format: str = "auto"
    """A name in `tool_formats.FORMATS`, or `auto` to read it off the template."""
    template: str | None = None
    """A Jinja chat template to render with instead of the tokenizer's."""
    template_kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra variables for the template (`enable_thinking`, say)."""
    eos_token_ids: tuple[int, ...] = ()
    """Every id that ends a turn (the generation config's); empty = the tokenizer's end-of-sequence token."""


def end_of_turn_ids(tokenizer: Any, generation_eos: int | Iterable[int] | None = None) -> tuple[int, ...]:
    """Every id that ends a turn: the generation config's `eos_token_id` (an id or a list: Qwen's `<|im_end|>`
    and `<|endoftext|>`, Llama 3's `<|eot_id|>`, `<|eom_id|>` and `<|end_of_text|>`), then the tokenizer's."""
    ids: list[int] = []
    if isinstance(generation_eos, int):
        ids.append(generation_eos)
    elif generation_eos is not None:
        ids.extend(int(i) for i in generation_eos)
    if tokenizer.eos_token_id is not None:
        ids.append(int(tokenizer.eos_token_id))
    return tuple(dict.fromkeys(ids))


class ChatFormat:
    """Renders conversations with a policy's chat template (and the episode's tool schemas) and reads its turns."""

    def __init__(
        self, tokenizer: Any, tools: Sequence[dict[str, Any]] | None = None, settings: ChatSettings | None = None
    ):
        settings = settings or ChatSettings()
        self.tokenizer = tokenizer
        self.tools = list(tools) if tools else None
        self.template: str | None = settings.template or getattr(tokenizer, "chat_template", None)
        self.template_kwargs = dict(settings.template_kwargs)
        self.tool_format: ToolCallFormat = tool_format(settings.tool_format, self.template)
        self.tool_format_source = (
            "configured" if settings.tool_format != "auto" else "template" if detect(self.template) else "assumed"
        )
        """Where the format came from: `configured`, read off the `template`, or `assumed` (Hermes, the template
        showing none)."""
        self.reasoning = ReasoningMarkers.in_template(self.template)
        self.eos_token_ids = frozenset(settings.eos_token_ids or end_of_turn_ids(tokenizer))
        self.eos_texts = tuple(tokenizer.convert_ids_to_tokens(sorted(self.eos_token_ids)))
        self._prompt_opens_reasoning: bool | None = None
        self._rewritten_by: list[str] | None = None

    @classmethod
    def of(cls, policy: Any, tools: Sequence[dict[str, Any]] | None = None) -> ChatFormat:
        """The format of `policy` (its `chat_settings` when it has them)."""
        return cls(policy.tokenizer, tools, getattr(policy, "chat_settings", None))

    # --- rendering -------------------------------------------------------------------------------------

    def render(self, messages: Sequence[dict[str, Any]], *, add_generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            list(messages),
            tools=self.tools,
            tokenize=False,
            add_generation_prompt=add_generation_prompt,
            chat_template=self.template,
            **self.template_kwargs,
        )

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt_ids(self, messages: Sequence[dict[str, Any]]) -> list[int]:
        return self.encode(self.render(messages, add_generation_prompt=True))

    def observation_ids(
        self,
        history: Sequence[dict[str, Any]],
        new_messages: Sequence[dict[str, Any]],
        *,
        sampled_eos: bool,
        add_generation_prompt: bool = True,
    ) -> list[int]:
        """Ids that follow a sampled turn: the rest of its end-of-turn markup (its end-of-turn token too when the
        sampler stopped before it), then `new_messages` rendered, then (optionally) the next generation prompt.
        `history` ends with that turn's assistant message."""
        stubbed = [*history[:-1], _stub(history[-1]), *new_messages]
        rendered = self.render(stubbed, add_generation_prompt=add_generation_prompt)
        at = rendered.rfind(_SENTINEL)
        if at < 0:
            raise ConfigError("the chat template does not render assistant turns (no assistant text in its output)")
        end, terminator = self._turn_end(rendered, at)
        return self.encode(("" if sampled_eos else terminator) + rendered[end:])

    def _turn_end(self, rendered: str, after: int) -> tuple[int, str]:
        """(index after, text of) the first end-of-turn token at or after `after`."""
        found = [(i, text) for text in self.eos_texts if (i := rendered.find(text, after)) >= 0]
        if not found:
            raise ConfigError(
                "the chat template ends assistant turns with no end-of-turn id of the model "
                f"({', '.join(self.eos_texts)}); add the template's terminator to generation_config.json's eos_token_id"
            )
        i, text = min(found)
        return i + len(text), text

    def history_rewritten_by(self) -> list[str]:
        """Which appended messages make the template re-render earlier turns differently (not prefix-preserving):
        `a tool result` after a turn that called a tool, `a correction` (a user message) after a turn. Rollouts
        stay token-exact either way (observations are rendered against the sampled prefix); what changes is that
        the recorded messages no longer re-render to the ids the policy saw."""
        if self._rewritten_by is None:
            call = {"type": "function", "id": "abcdefghi", "function": {"name": "echo", "arguments": {}}}
            turn: dict[str, Any] = {"role": "assistant", "content": "Hi."}
            if self.reasoning is not None:
                turn["reasoning_content"] = "Think."
            opening = [{"role": "system", "content": "Use the tools."}, {"role": "user", "content": "Say hi."}]
            cases = {
                "a tool result": [
                    *opening,
                    {"role": "assistant", "content": "", "tool_calls": [call]},
                    {"role": "tool", "tool_call_id": "abcdefghi", "name": "echo", "content": "hi"},
                ],
                "a correction": [*opening, turn, {"role": "user", "content": "Error: try again."}],
            }
            self._rewritten_by = [
                name
                for name, messages in cases.items()
                if not self.render(messages, add_generation_prompt=True).startswith(
                    self.render(messages[:-1], add_generation_prompt=False)
                )
            ]
        return list(self._rewritten_by)

    @property
    def prompt_opens_reasoning(self) -> bool:
        """Whether the generation prompt opens a reasoning block, so every sampled turn starts inside one."""
        if self._prompt_opens_reasoning is None:
            self._prompt_opens_reasoning = False
            if self.reasoning is not None:
                probe = [{"role": "user", "content": _SENTINEL}]
                text = self.render(probe, add_generation_prompt=True)
                self._prompt_opens_reasoning = self.reasoning.opened_by(text[text.rfind(_SENTINEL) :])
        return self._prompt_opens_reasoning

    # --- reading turns ---------------------------------------------------------------------------------

    def parse(self, text: str, *, id_prefix: str = "call") -> ParsedTurn:
        """A sampled turn's reasoning, content and tool calls; never raises. Calls are read after the reasoning
        only: a call the policy merely thought about is not run."""
        reasoning = None
        if self.reasoning is not None:
            reasoning, text = self.reasoning.split(text, starts_inside=self.prompt_opens_reasoning)
        parsed = self.tool_format.parse(text, id_prefix=id_prefix, schemas=self.tools)
        return ParsedTurn(parsed.content, parsed.tool_calls, parsed.error, reasoning)

    def assistant_message(self, parsed: ParsedTurn, raw_text: str) -> dict[str, Any]:
        """The OpenAI-format assistant message of a parsed turn (its raw text when the markup was malformed);
        reasoning goes to `reasoning_content`, where templates that render reasoning read it."""
        message: dict[str, Any] = {"role": "assistant", "content": parsed.content}
        if parsed.error:
            message["content"] = self.content_of(raw_text).strip()
        elif parsed.tool_calls:
            message["tool_calls"] = [
                {"type": "function", "id": c.id, "function": {"name": c.name, "arguments": c.arguments}}
                for c in parsed.tool_calls
            ]
        if parsed.reasoning is not None:
            message["reasoning_content"] = parsed.reasoning
        return message

    def content_of(self, text: str) -> str:
        """A sampled turn's text after its reasoning block (all of it when the template has none)."""
        if self.reasoning is None:
            return text
        return self.reasoning.split(text, starts_inside=self.prompt_opens_reasoning)[1]

    def correction(self, error: str) -> dict[str, Any]:
        """The user message that tells the policy what was wrong with its tool-call markup."""
        return {"role": "user", "content": f"Error: {error}. Write tool calls as {self.tool_format.example}"}


def tool_format(name: str, template: str | None) -> ToolCallFormat:
    """The named format, or (`auto`) the template's, or Hermes when the template shows none."""
    if name == "auto":
        return detect(template) or FORMATS["hermes"]
    if name not in FORMATS:
        raise ConfigError(f"unknown policy.tool_parser {name!r}; known: auto, {', '.join(FORMATS)}")
    return FORMATS[name]


def _stub(message: dict[str, Any]) -> dict[str, Any]:
    """The sampled assistant turn, its text and tool names replaced by the sentinel (arguments emptied): what the
    template writes after it does not depend on them, and nothing the policy wrote can look like markup."""
    stub: dict[str, Any] = {"role": "assistant", "content": _SENTINEL}
    if message.get("tool_calls"):
        stub["tool_calls"] = [
            {
                "type": "function",
                "id": call.get("id"),
                "function": {"name": f"{_SENTINEL}{k}", "arguments": {}},
            }
            for k, call in enumerate(message["tool_calls"])
        ]
    return stub


@dataclass(frozen=True)
class Mismatch:
    """Where a trajectory's ids diverge from the chat template's rendering of its messages."""

    position: int
    expected: str
    got: str


def template_mismatch(chat: ChatFormat, trajectory: Trajectory) -> Mismatch | None:
    """Check a trajectory against a full re-rendering of its final conversation: for a prefix-preserving template
    the ids must agree. The rendering may extend past the ids (closing markup after the last turn, or tool results
    of a final turn that were never fed back); anything else is reported with a little decoded context."""
    rendered = chat.encode(chat.render(trajectory.messages, add_generation_prompt=False))
    ids = trajectory.token_ids
    for i, (a, b) in enumerate(zip(rendered, ids, strict=False)):
        if a != b:
            decode = chat.tokenizer.decode
            return Mismatch(i, decode(rendered[i : i + 8]), decode(ids[i : i + 8]))
    if len(ids) > len(rendered):
        return Mismatch(len(rendered), "", chat.tokenizer.decode(ids[len(rendered) : len(rendered) + 8]))
    return None
