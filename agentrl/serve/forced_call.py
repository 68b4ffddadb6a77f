"""`ForcedCall`: constrained decoding of a forced tool call's arguments (`tool_choice` required or named).

`tool_choice.py` forces a call's opening markup up to its arguments; what the model writes after it is sampled
under `ForcedCall`, a `forbid(ids)` for `TransformersPolicy.generate`: the rest of the opening markup, arguments
that fit the tool's JSON schema (`JsonGrammar`), the format's closing markup, then an end-of-turn token and nothing
else. Every other id gets probability 0 before temperature and top-p, so the log-probs describe the distribution
the call was sampled from, and the call always parses and fits its schema unless `max_tokens` cuts it off.

It applies to formats whose calls carry their arguments as a JSON object after the forced opening (Hermes, Llama
3 JSON, Mistral: `ToolCallFormat.write` unchanged); the others (Qwen3-Coder XML, pythonic) are validated after
sampling instead. Token texts come from `CallVocabulary` (once per tokenizer): each id's text, special tokens and
ids whose text is not whole characters (a byte of a multi-byte character) left out; the ids allowed after a state
are found by walking a trie of those texts through the grammar, and cached per state.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from agentrl.serve.json_grammar import JsonGrammar, State

_ANCHOR = "a"
"""Text decoded before each token, so a tokenizer that drops a word's leading space when it starts the text
(SentencePiece) keeps it."""


class CallVocabulary:
    """The texts of a tokenizer's ids, as a character trie (built once per tokenizer: one pass over the
    vocabulary)."""

    def __init__(self, tokenizer: Any, vocab_size: int | None = None):
        size = max(len(tokenizer), vocab_size or 0)
        special = set(getattr(tokenizer, "all_special_ids", ()))
        special |= {i for i, t in getattr(tokenizer, "added_tokens_decoder", {}).items() if getattr(t, "special", True)}
        anchor = tokenizer.encode(_ANCHOR, add_special_tokens=False)
        prefix = tokenizer.decode(anchor, skip_special_tokens=False)
        pieces = tokenizer.batch_decode([[*anchor, i] for i in range(len(tokenizer))], skip_special_tokens=False)
        self.texts: list[str | None] = [None] * size
        self.trie: dict[str, Any] = {}
        for i, piece in enumerate(pieces):
            text = piece[len(prefix) :] if piece.startswith(prefix) else None
            if i in special or not text or "\ufffd" in text:
                continue
            self.texts[i] = text
            node = self.trie
            for char in text:
                node = node.setdefault(char, {})
            node.setdefault("", []).append(i)
        self.all_ids = frozenset(range(size))


class CallProgram:
    """What a forced call's continuation must be: `before`, a JSON value of `schema`, `after`, an end of turn;
    states are (part, position or grammar state)."""

    def __init__(self, before: str, schema: Mapping[str, Any], after: str):
        self.before, self.after = before, after
        self.grammar = JsonGrammar(schema)

    def start(self) -> tuple[int, Any]:
        return (0, 0) if self.before else (1, self.grammar.start())

    def feed(self, state: tuple[int, Any], char: str) -> tuple[int, Any] | None:
        part, inner = state
        if part == 0:
            if char != self.before[inner]:
                return None
            return (0, inner + 1) if inner + 1 < len(self.before) else (1, self.grammar.start())
        if part == 1:
            following: State | None = self.grammar.feed(inner, char)
            if following is not None:
                return (1, following)
            if not self.grammar.complete(inner) or not self.after:
                return None
            return self.feed((2, 0), char)
        if part == 2 and inner < len(self.after) and char == self.after[inner]:
            return (2, inner + 1)
        return None

    def finished(self, state: tuple[int, Any]) -> bool:
        part, inner = state
        if part == 1:
            return not self.after and self.grammar.complete(inner)
        return part == 2 and inner == len(self.after)


class ForcedCall:
    """`forbid(ids)` for one forced call: the ids that would leave the call's program. Shared by every choice of a
    request (its state is a function of the ids alone) and by requests forcing the same call (its cache)."""

    def __init__(self, vocabulary: CallVocabulary, program: CallProgram, eos_ids: Collection[int]):
        self.vocabulary, self.program = vocabulary, program
        self.eos_ids = frozenset(eos_ids)
        self._forbidden: dict[Any, frozenset[int]] = {}
        self._states: dict[tuple[int, ...], Any] = {}

    def __call__(self, ids: list[int]) -> frozenset[int]:
        state = self._state(ids)
        if state is None:  # ids the program never allowed (cannot happen under this forbid): leave them be
            return frozenset()
        if state not in self._forbidden:
            allowed = self._allowed(state)
            # no token continues the call (a vocabulary whose texts the walk cannot read): sample it unconstrained,
            # and `checked_call` judges what comes out, rather than forbid every token
            self._forbidden[state] = self.vocabulary.all_ids - allowed if allowed else frozenset()
        return self._forbidden[state]

    def _state(self, ids: Sequence[int]) -> Any:
        """The program's state after `ids`, from the state after all but the last (else from the start)."""
        key = tuple(ids)
        if key in self._states:
            return self._states[key]
        known = len(key) - 1 if key and key[:-1] in self._states else 0  # a row adds one id a step
        state = self._states[key[:known]] if known else self.program.start()
        if len(self._states) > 4096:  # the prefixes of the rows sampling now are what is asked for
            self._states.clear()
        for k in range(known, len(key)):
            token = key[k]
            text = self.vocabulary.texts[token] if token < len(self.vocabulary.texts) else None
            for char in text or "\0":
                state = self.program.feed(state, char) if state is not None else None
            self._states[key[: k + 1]] = state
        return state

    def _allowed(self, state: Any) -> set[int]:
        allowed = set(self.eos_ids) if self.program.finished(state) else set()
        stack = [(self.vocabulary.trie, state)]
        while stack:
            node, at = stack.pop()
            for char, child in node.items():
                if char == "":
                    allowed.update(child)
                    continue
                following = self.program.feed(at, char)
                if following is not None:
                    stack.append((child, following))
        return allowed


def json_arguments_format(tool_format: Any) -> bool:
    """Whether the format writes a call as its forced opening, the arguments' JSON, then its `closing`."""
    from agentrl.rollout.chat.tool_call_format import ToolCallFormat

    return type(tool_format).write is ToolCallFormat.write


def tool_schema(tools: Sequence[Mapping[str, Any]] | None, name: str) -> Mapping[str, Any] | None:
    """The `parameters` schema of tool `name` among a request's tools."""
    for tool in tools or ():
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if isinstance(function, Mapping) and function.get("name") == name:
            parameters = function.get("parameters")
            return parameters if isinstance(parameters, Mapping) else {"type": "object"}
    return None


def arguments_error(schema: Mapping[str, Any], arguments: Any) -> str | None:
    """Why `arguments` do not fit `schema` (the first reason), or None when they do (or the schema is not one)."""
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    validator = validator_for(schema)
    try:
        validator.check_schema(schema)
    except SchemaError:
        return None
    error = next(iter(sorted(validator(schema).iter_errors(arguments), key=lambda e: list(e.path))), None)
    if error is None:
        return None
    where = ".".join(str(p) for p in error.path)
    return f"{where}: {error.message}" if where else error.message


class ForcedCalls:
    """A chat service's `ForcedCall`s: one per (markup left to write, schema, closing), over one vocabulary."""

    def __init__(self, tokenizer: Any, vocab_size: int | None = None):
        self.tokenizer, self.vocab_size = tokenizer, vocab_size
        self._vocabulary: CallVocabulary | None = None
        self._calls: dict[str, ForcedCall] = {}

    def get(self, choice: Any, chat: Any, tools: Sequence[Mapping[str, Any]] | None) -> ForcedCall | None:
        """The constraint of a named forcing (`ToolChoice` with a `name`), None where none applies (blocking: the
        first one walks the vocabulary)."""
        schema = tool_schema(tools, choice.name) if choice.name else None
        if schema is None or not json_arguments_format(chat.tool_format) or not choice.markup.startswith(choice.forced):
            return None
        before = choice.markup[len(choice.forced) :].rstrip()  # whitespace before the arguments is the grammar's
        after = chat.tool_format.closing
        key = json.dumps([before, schema, after, sorted(chat.eos_token_ids)], sort_keys=True)
        if key not in self._calls:
            if self._vocabulary is None:
                self._vocabulary = CallVocabulary(self.tokenizer, self.vocab_size)
            self._calls[key] = ForcedCall(self._vocabulary, CallProgram(before, schema, after), chat.eos_token_ids)
        return self._calls[key]


def checked_call(parsed: Any, choice: Any, tools: Sequence[Mapping[str, Any]] | None) -> Any:
    """`parsed` (a `ParsedTurn`) with a parse error when the call a named forcing opened has arguments that do not
    fit its schema: a forced call is returned as `tool_calls` only when it fits."""
    import dataclasses

    schema = tool_schema(tools, choice.name) if choice.name else None
    if schema is None or parsed.error or not parsed.tool_calls:
        return parsed
    for call in parsed.tool_calls:
        why = arguments_error(tool_schema(tools, call.name) or schema, call.arguments)
        if why is not None:
            error = f"the arguments of {call.name} do not fit its schema ({why})"
            return dataclasses.replace(parsed, tool_calls=(), error=error)
    return parsed
