"""The tiny policy's tokenizer: a byte-level BPE trained in-process on rendered demonstrations.

Pre-tokenization follows Qwen2 (its split regex, then byte-level mapping without a second regex), except that
digits split into runs of up to three from the left, as in cl100k, and every such run is one token: a 1M-parameter
model copies a number as two or three distinct tokens far more reliably than as a run of single digits, where
repeated digits make "attend to what followed this token last time" ambiguous. transformers loads any qwen2
checkpoint's tokenizer with Qwen2's own regex, so load this one with `agentrl.policy.loading.load_tokenizer`.

The chat markers are single ids: `<|endoftext|>` (padding), `<|im_start|>`, `<|im_end|>` (end of turn) as special
tokens, and `<tool_call>`, `</tool_call>`, `<tool_response>`, `</tool_response>` as ordinary added
tokens, which a decode with `skip_special_tokens=True` keeps, as in Qwen2.5. The chat template is trl's copy
of the Qwen2.5 tool-calling template.

Conversations are rendered to text by `render`, which uses an untrained tokenizer with the same template: the
text a chat template produces does not depend on the vocabulary, so demos can be rendered before the tokenizer
they train exists.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast
from trl.chat_template_utils import qwen2_5_chat_template

TOOLLESS_TEMPLATE_PREFIX = (
    "{#- The tiny policy learned its tools from demonstrations: tool schemas are not rendered, which keeps its "
    "prompts short. Tool calls and tool responses use the Qwen2.5 format unchanged. -#}\n{%- set tools = none %}\n"
)
"""What the shipped checkpoints' chat templates open with, before Qwen2.5's template unchanged."""
PAD_TOKEN = "<|endoftext|>"
EOS_TOKEN = "<|im_end|>"
SPECIAL_TOKENS = [PAD_TOKEN, "<|im_start|>", EOS_TOKEN]
"""Markers with fixed ids 0, 1, 2 that never occur inside ordinary text."""
TOOL_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
"""Tool-call markup, one id each, appended after the trained vocabulary."""
DEFAULT_VOCAB_SIZE = 2560
NUMBER_CHUNKS = [str(n).zfill(width) for width in (1, 2, 3) for n in range(10**width)]
"""Every digit run the pre-tokenizer can produce; the vocabulary holds each as one token."""

SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
"""Qwen2's pre-tokenization regex with digit runs of up to three: words with one leading non-letter, numbers in
chunks of three from the left, punctuation runs, spaces."""
SINGLE_PUNCTUATION_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}"\\]?\p{L}+|\p{N}{1,3}|["\\]"""
    r"""| ?[^\s\p{L}\p{N}"\\][\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
"""`SPLIT_PATTERN` with one punctuation mark per pre-token instead of a run, and quotes and backslashes always
alone (no space before them, no word after). `split_punctuation` switches a trained tokenizer to it.

An easy SWE fix written into a JSON tool call copies the issue's expression. With punctuation runs the copy is
other tokens: `(f - 32)` in backticks opens with "`(" but as a JSON value with ` "(`, and `split(" ")` ends in
`" ")` in the issue but in `\\" \\")` in the call. With this pattern the only difference is a backslash token
before each quote. The vocabulary and ids stay as trained; merges across punctuation just never apply, so a
checkpoint trained with `SPLIT_PATTERN` can be fine-tuned further with this one
(`python -m agentrl.tiny.build --single-punctuation`). The shipped policies keep `SPLIT_PATTERN`; what a `tiny-swe`
rebuilt with this pattern does is logged in docs/experiments/swe_tiny_policy.md."""


def _pre_tokenizer(pattern: str) -> pre_tokenizers.PreTokenizer:
    return pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )


def _untrained() -> Tokenizer:
    """A byte-level BPE with Qwen2 pre-tokenization and no merges yet."""
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = _pre_tokenizer(SPLIT_PATTERN)
    tok.decoder = decoders.ByteLevel()
    return tok


def split_punctuation(tokenizer: PreTrainedTokenizerFast) -> None:
    """Make `tokenizer` (one this module trained) pre-tokenize with `SINGLE_PUNCTUATION_PATTERN`, in place."""
    tokenizer.backend_tokenizer.pre_tokenizer = _pre_tokenizer(SINGLE_PUNCTUATION_PATTERN)


def _wrap(tok: Tokenizer) -> PreTrainedTokenizerFast:
    """`tok` with its added tokens, as a transformers tokenizer carrying the chat template."""
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in TOOL_TOKENS])
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        additional_special_tokens=["<|im_start|>"],
        clean_up_tokenization_spaces=False,
        model_max_length=1024,
    )
    wrapped.chat_template = qwen2_5_chat_template
    return wrapped


@functools.cache
def _renderer() -> PreTrainedTokenizerFast:
    return _wrap(_untrained())


def render(messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]], **kwargs: Any) -> str:
    """The chat-template text of a conversation, as any tokenizer from this module renders it."""
    return _renderer().apply_chat_template(list(messages), tools=list(tools), tokenize=False, **kwargs)


def train_tokenizer(texts: Iterable[str], *, vocab_size: int = DEFAULT_VOCAB_SIZE) -> PreTrainedTokenizerFast:
    """A tokenizer trained on `texts` (rendered conversations); deterministic for the same texts.

    `vocab_size` bounds the byte alphabet, the 1,100 digit chunks, the merges and the special tokens; the four
    tool tokens come on top. The digit chunks are not learned but given: their merges come first and cover every
    run of up to three digits, however rare; the texts' merges fill the rest.
    """
    multi_digit = [c for c in NUMBER_CHUNKS if len(c) > 1]
    if vocab_size < 2 * len(multi_digit):
        raise ValueError(f"vocab_size {vocab_size} leaves no room for the {len(multi_digit)} digit chunks")
    tok = _untrained()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(multi_digit),
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    # train on the text between markers, which is what the finished tokenizer pre-tokenizes: added tokens are
    # cut out of the input first, so no merge ever spans one
    marker = re.compile("|".join(re.escape(t) for t in SPECIAL_TOKENS + TOOL_TOKENS))
    tok.train_from_iterator((piece for text in texts for piece in marker.split(text) if piece), trainer=trainer)
    return _wrap(_with_number_chunks(tok, multi_digit))


def _with_number_chunks(trained: Tokenizer, multi_digit: list[str]) -> Tokenizer:
    """`trained` with its digit merges replaced by one token per digit chunk.

    Digits only ever meet digits inside a pre-token, so merges that touch a digit are separate from the rest. A
    three-digit chunk gets two merges, (ab, c) and (a, bc): BPE applies whichever adjacent pair ranks first.
    """
    model = json.loads(trained.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    text_merges = [m for m in merges if not _has_digit(m[0] + m[1])]
    digit_merges = [(c[:1], c[1:]) for c in multi_digit if len(c) == 2]
    digit_merges += [pair for c in multi_digit if len(c) == 3 for pair in ((c[:2], c[2:]), (c[:1], c[1:]))]
    by_id = sorted(model["vocab"].items(), key=lambda item: item[1])
    vocab = [t for t, _ in by_id if len(t) == 1 or not _has_digit(t)] + multi_digit
    tok = _untrained()
    tok.model = models.BPE(vocab={t: i for i, t in enumerate(vocab)}, merges=digit_merges + text_merges)
    return tok


def _has_digit(token: str) -> bool:
    return any(c.isdigit() for c in token)
