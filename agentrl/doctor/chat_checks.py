"""The fast checks of `agentrl doctor`: a model's chat format, from its tokenizer and generation config alone.

They need no weights, so `agentrl train` runs them before loading a model onto a GPU and stops early when one
fails. Each check renders small conversations with the real template:

- template:        there is one, and it renders a whole tool round (the call's name and arguments, the result);
- tool calls:      the format is known (named by `policy.tool_parser` or read off the template);
- call markup:     a tool call as the template itself writes it in the history (what the model learnt to write)
                   parses back into that call under the chosen format;
- end of turn:     the token the template closes assistant turns with is one of the model's end-of-turn ids, so
                   sampling stops where the template says a turn ends;
- reasoning:       whether turns carry a reasoning block, and whether the generation prompt opens it;
- prefix:          whether appending a tool result, or a correction after a turn with reasoning, re-renders the
                   history unchanged (agentrl stays token-exact either way: it renders observations against the
                   sampled prefix; but messages recorded from such a template re-render to another context);
- scripted episode: a two-turn tool episode in the model's own format through the react scaffold and a real tool
                   server parses, runs and ends as an answer, its ids the sampled ids plus each observation;
- round trip:      decoding the episode's ids and encoding the text again gives the same ids (what a server that
                   returns text instead of ids would break).
"""

from __future__ import annotations

import asyncio
from typing import Any

from agentrl.doctor.verdicts import Verdict
from agentrl.errors import ConfigError
from agentrl.rollout.chat import ChatFormat, ChatSettings
from agentrl.rollout.chat.tool_formats import FORMATS

_PROBE = "AGENTRLDOCTORPROBE"
_TOOL = {
    "type": "function",
    "function": {
        "name": "echo",
        "description": "Echo the text back.",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
}


def chat_checks(tokenizer: Any, settings: ChatSettings | None = None) -> list[Verdict]:
    """Every fast check of the tokenizer's chat format under `settings`; never raises."""
    settings = settings or ChatSettings()
    template = getattr(tokenizer, "chat_template", None)
    if not template:
        fix = "use an instruct checkpoint, or give one with policy.chat_template=FILE.jinja"
        return [Verdict("template", "fail", "the tokenizer has no chat template", fix)]
    try:
        chat = ChatFormat(tokenizer, [_TOOL], settings)
    except ConfigError as e:
        return [Verdict("tool calls", "fail", str(e), "set policy.tool_parser to a known format")]
    checks = (_renders_tools, _tool_format, _call_markup, _end_of_turn, _reasoning, _prefix, _scripted_episode)
    verdicts = []
    for check in checks:
        try:
            verdicts.extend(check(chat))
        except Exception as e:  # a template that raises on an ordinary conversation is a finding, not a crash
            verdicts.append(Verdict(check.__name__.strip("_").replace("_", " "), "fail", f"{type(e).__name__}: {e}"))
    return verdicts


def _round(chat: ChatFormat, arguments: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    call = {"type": "function", "id": "abcdefghi", "function": {"name": "echo", "arguments": arguments or {}}}
    return [
        {"role": "system", "content": "Use the tools."},
        {"role": "user", "content": "Say hi."},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "abcdefghi", "name": "echo", "content": f"{_PROBE}-result"},
    ]


def _renders_tools(chat: ChatFormat) -> list[Verdict]:
    text = chat.render(_round(chat, {"text": f"{_PROBE}-argument"}), add_generation_prompt=True)
    missing = [part for part in ("echo", f"{_PROBE}-argument", f"{_PROBE}-result") if part not in text]
    if missing:
        detail = f"the template drops part of a tool round ({', '.join(missing)} not rendered)"
        return [Verdict("template", "fail", detail, "use a template that renders tool calls and tool results")]
    return [Verdict("template", "ok", "renders tool calls, their arguments and tool results")]


def _tool_format(chat: ChatFormat) -> list[Verdict]:
    name = chat.tool_format.name
    if chat.tool_format_source == "assumed":
        detail = "the template shows no known tool-call markup; assuming Hermes <tool_call> JSON"
        fix = f"set policy.tool_parser ({', '.join(FORMATS)}) to the format the model writes"
        return [Verdict("tool calls", "warn", detail, fix)]
    where = "read off the template" if chat.tool_format_source == "template" else "as configured"
    return [Verdict("tool calls", "ok", f"format {name} ({where})")]


def _call_markup(chat: ChatFormat) -> list[Verdict]:
    """The template's own rendering of a call, cut from the assistant turn, read back by the chosen parser. A
    template whose markup the parser cannot read means every call the model writes would be booked malformed."""
    arguments = {"text": f"{_PROBE}-argument"}
    conversation = _round(chat, arguments)
    head = chat.render(conversation[:2], add_generation_prompt=True)
    full = chat.render(conversation[:3], add_generation_prompt=False)
    start = next((i for i, (a, b) in enumerate(zip(head, full, strict=False)) if a != b), min(len(head), len(full)))
    turn = full[start:]
    ends = [turn.find(eos) for eos in chat.eos_texts if eos and eos in turn]
    turn = turn[: min(ends)] if ends else turn
    if "echo" not in turn:  # the template drops calls from the history: the template check says so
        return []
    parsed = chat.parse(turn)
    calls = [(c.name, c.arguments) for c in parsed.tool_calls]
    if parsed.error is None and calls == [("echo", arguments)]:
        return [Verdict("call markup", "ok", f"the template's own calls parse as {chat.tool_format.name}")]
    shown = " ".join(turn.split())[:90]
    detail = f"the template writes a call as {shown!r}, which the {chat.tool_format.name} parser does not read back"
    if chat.tool_format_source == "configured":  # the user named the format: their call, but say what it means
        return [Verdict("call markup", "warn", detail, "check policy.tool_parser against what the model writes")]
    fix = f"set policy.tool_parser to the model's format ({', '.join(FORMATS)}); other formats are not read yet"
    return [Verdict("call markup", "fail", detail, fix)]


def _end_of_turn(chat: ChatFormat) -> list[Verdict]:
    messages = [{"role": "user", "content": "Say hi."}, {"role": "assistant", "content": _PROBE}]
    text = chat.render(messages, add_generation_prompt=False)
    after = chat.encode(text[text.rfind(_PROBE) + len(_PROBE) :])
    special = set(getattr(chat.tokenizer, "all_special_ids", ())) | set(chat.tokenizer.added_tokens_decoder)
    terminator = next((i for i in after if i in special), None)
    names = ", ".join(chat.eos_texts)
    if terminator is None:
        detail = "the template closes assistant turns with no special token: a turn cannot end on a token"
        return [Verdict("end of turn", "fail", detail, "use a template that ends assistant turns with a special token")]
    token = chat.tokenizer.convert_ids_to_tokens(terminator)
    if terminator not in chat.eos_token_ids:
        detail = f"assistant turns end with {token} (id {terminator}), which is not an end-of-turn id ({names})"
        fix = f"add {terminator} to eos_token_id in the model's generation_config.json"
        return [Verdict("end of turn", "fail", detail, fix)]
    return [Verdict("end of turn", "ok", f"turns end with {token}; end-of-turn ids: {names}")]


def _reasoning(chat: ChatFormat) -> list[Verdict]:
    if chat.reasoning is None:
        return [Verdict("reasoning", "ok", "no reasoning block in the template")]
    where = "the generation prompt opens it" if chat.prompt_opens_reasoning else "the model opens it"
    return [Verdict("reasoning", "ok", f"{chat.reasoning.open}…{chat.reasoning.close} split off each turn ({where})")]


def _prefix(chat: ChatFormat) -> list[Verdict]:
    broken = chat.history_rewritten_by()
    if broken:
        detail = f"appending {' or '.join(broken)} re-renders earlier turns differently (rollouts stay token-exact)"
        fix = (
            "nothing for RL; before SFT or train-recorded on recorded messages, switch to a prefix-preserving "
            "template (trl.chat_template_utils.get_training_chat_template) with policy.chat_template"
        )
        return [Verdict("prefix", "warn", detail, fix)]
    return [Verdict("prefix", "ok", "appending messages re-renders the history unchanged")]


def _scripted_episode(chat: ChatFormat) -> list[Verdict]:
    from agentrl.rollout.chat import template_mismatch

    trajectory = asyncio.run(_play(chat))
    problems = []
    if trajectory.stop_reason.value != "answered" or trajectory.answer != "done":
        problems.append(f"ended {trajectory.stop_reason.value}: {trajectory.error or trajectory.turns[0].parse_error}")
    elif not trajectory.turns[0].tool_calls or _PROBE not in chat.tokenizer.decode(
        list(trajectory.turns[0].observation_ids)
    ):
        problems.append("the call did not run, or its result did not reach the context")
    if problems:
        return [
            Verdict("scripted episode", "fail", "; ".join(problems), "set policy.tool_parser to the model's format")
        ]
    verdicts = [
        Verdict("scripted episode", "ok", f"a call in {chat.tool_format.name} format parsed, ran and was fed back")
    ]
    ids = trajectory.token_ids
    again = chat.encode(chat.tokenizer.decode(ids, skip_special_tokens=False))
    if again != ids:
        at = next((i for i, (a, b) in enumerate(zip(again, ids, strict=False)) if a != b), min(len(ids), len(again)))
        detail = f"decode → encode changes the episode's ids at position {at}"
        fix = "sample token ids, never text, from servers (agentrl's transports do)"
        verdicts.append(Verdict("round trip", "warn", detail, fix))
    else:
        verdicts.append(Verdict("round trip", "ok", f"decode → encode reproduces all {len(ids)} ids"))
    if template_mismatch(chat, trajectory) is None:
        verdicts.append(Verdict("re-render", "ok", "the whole episode re-renders to the same ids"))
    return verdicts


async def _play(chat: ChatFormat) -> Any:
    from agentrl.config import RolloutConfig
    from agentrl.scaffolds.react import ReactScaffold
    from agentrl.testing import ScriptedPolicy, echo
    from agentrl.toolserver.app import create_app
    from agentrl.toolserver.client import ToolClient
    from agentrl.types import Task

    eos = sorted(chat.eos_token_ids)[0]
    terminator = chat.tokenizer.convert_tokens_to_ids(chat.tokenizer.eos_token)
    policy = ScriptedPolicy(
        chat.tokenizer,
        [_with_reasoning(chat, chat.tool_format.write("echo", {"text": _PROBE})), _with_reasoning(chat, "done")],
        end_of_turn=terminator if terminator in chat.eos_token_ids else eos,
    )
    policy.chat_settings = ChatSettings(
        tool_format=chat.tool_format.name, template_kwargs=chat.template_kwargs, eos_token_ids=tuple(chat.eos_token_ids)
    )
    rollout = RolloutConfig(max_turns=3, max_new_tokens_per_turn=256, max_tokens_per_episode=8192)
    scaffold = ReactScaffold(tools=[echo], rollout=rollout)
    async with ToolClient(app=create_app([echo])) as tools:
        return await scaffold.run(
            Task("doctor", "Echo a word, then say done."), policy, tools, group_id="d", trajectory_id="d/0"
        )


def _with_reasoning(chat: ChatFormat, text: str) -> str:
    if chat.reasoning is None:
        return text
    thought = f"Thinking.\n{chat.reasoning.close}\n\n"
    return thought + text if chat.prompt_opens_reasoning else f"{chat.reasoning.open}\n{thought}{text}"
