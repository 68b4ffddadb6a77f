"""Supervised warm start: fine-tune a policy on demonstration conversations with trl's `SFTTrainer`.

A conversation is `{"messages": [...OpenAI messages...], "tools": [...function-tool schemas...]}`, rendered with
the tokenizer's chat template exactly as the scaffolds render it at rollout time. The loss covers the assistant's
tokens only (tool calls, answers and their end-of-turn token), never the prompt or the tool results. trl swaps in
its training variant of the chat template (the same text, with `{% generation %}` markers) to build that mask.
An assistant message with `"loss": false` is context, not a target: a demonstration can show a failed call and the
recovery from it while teaching only the recovery.

    metrics = run_sft(model, tokenizer, conversations, output_dir="runs/sft", epochs=3, lr=1e-3)
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrl.errors import InputError
from agentrl.json_lines import read_json_lines

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SFTSettings:
    """How to run the warm start."""

    epochs: float = 3.0
    """Passes over the conversations."""
    lr: float = 1e-3
    """Peak learning rate (AdamW)."""
    batch_size: int = 16
    """Conversations per optimizer step."""
    seed: int = 0
    """Seeds initialisation-free randomness: data order, dropout."""
    max_length: int = 1024
    """Conversations are truncated to this many tokens."""
    lr_scheduler: str = "cosine"
    """A transformers scheduler name (`cosine`, `linear`, `constant`, ...)."""
    warmup_fraction: float = 0.05
    """Fraction of the optimizer steps spent warming the learning rate up from zero."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    max_steps: int | None = None
    """Stop after this many optimizer steps (overrides `epochs`); None trains for `epochs`."""
    logging_steps: int = 10
    """Record the training loss every this many optimizer steps."""
    use_cpu: bool = True
    """Train on the CPU even when an accelerator is present (the tiny policy is faster there)."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass: less memory, more time (for large models)."""
    group_by_length: bool = False
    """Batch conversations of similar length together (less padding when lengths vary a lot; same seed, same
    order)."""
    stop_at_loss: float | None = None
    """Stop early once the training loss, averaged over a logging window (`logging_steps`), falls below this;
    None trains to the end."""


def read_conversations(path: str | Path) -> list[dict[str, Any]]:
    """The conversations of a JSONL file, one `{"messages": [...], "tools": [...]}` object a line."""
    conversations = []
    for number, row in read_json_lines(path):
        if not isinstance(row.get("messages"), list):
            raise InputError(f'{path}:{number}: expected {{"messages": [...], "tools": [...]}}')
        conversations.append(row)
    return conversations


def run_sft(
    model: Any,
    tokenizer: Any,
    conversations: Sequence[dict[str, Any]],
    *,
    output_dir: str | Path,
    settings: SFTSettings | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """Fine-tune `model` in place on `conversations`; return trl's metrics plus the loss history.

    Options come from `settings`, with keyword `overrides` of its fields on top (`epochs=2, lr=3e-4`). The model
    is left trained but not saved; `output_dir` only receives the trainer's scratch files.
    """
    from trl import SFTConfig, SFTTrainer  # trl takes seconds to import

    settings = dataclasses.replace(settings or SFTSettings(), **overrides)
    # transformers 5 renamed the option and warns on every use of the old name, even when it is False
    fields = {f.name for f in dataclasses.fields(SFTConfig)}
    checkpointing = "activation_checkpointing" if "activation_checkpointing" in fields else "gradient_checkpointing"
    config = SFTConfig(
        output_dir=str(output_dir),
        num_train_epochs=settings.epochs,
        max_steps=settings.max_steps if settings.max_steps is not None else -1,
        learning_rate=settings.lr,
        lr_scheduler_type=settings.lr_scheduler,
        warmup_steps=settings.warmup_fraction,
        weight_decay=settings.weight_decay,
        per_device_train_batch_size=settings.batch_size,
        gradient_accumulation_steps=1,
        max_length=settings.max_length,
        assistant_only_loss=True,
        packing=False,
        train_sampling_strategy="group_by_length" if settings.group_by_length else "random",
        seed=settings.seed,
        data_seed=settings.seed,
        **{checkpointing: settings.gradient_checkpointing},
        use_cpu=settings.use_cpu,
        bf16=False,
        fp16=False,
        logging_steps=settings.logging_steps,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    template = tokenizer.chat_template
    context_only = any(m.get("loss") is False for c in conversations for m in c["messages"])
    tokenizer.chat_template = training_template(tokenizer, context_only=context_only)
    try:
        trainer = SFTTrainer(
            model=model, args=config, train_dataset=_dataset(conversations), processing_class=tokenizer
        )
        if settings.stop_at_loss is not None:
            trainer.add_callback(_stop_at_loss(settings.stop_at_loss))
        result = trainer.train()
    finally:
        tokenizer.chat_template = template
    losses = [(log["step"], log["loss"]) for log in trainer.state.log_history if "loss" in log]
    if not all(math.isfinite(loss) for _, loss in losses):
        logger.warning("non-finite SFT loss: %s", losses)
    return {**result.metrics, "loss_history": losses}


# A Jinja comment is matched first and kept as it is: trl's templates mention the markers in comments.
_GENERATION = re.compile(r"(\{#.*?#\})|(\{%-?\s*generation\s*-?%\})(.*?)(\{%-?\s*endgeneration\s*-?%\})", re.DOTALL)


def training_template(tokenizer: Any, *, context_only: bool = False) -> str:
    """The chat template with trl's `{% generation %}` markers, which the assistant-only loss mask needs.

    trl adds the markers to templates it knows; the shipped tiny policies' template is Qwen2.5's behind a short
    preamble (`TOOLLESS_TEMPLATE_PREFIX`) that hides it from trl, so the preamble is set aside while trl patches
    the rest. With `context_only`, an assistant message with `"loss": false` renders the same text outside the
    markers, so the loss skips it."""
    from trl.chat_template_utils import get_training_chat_template, has_generation_markers

    from agentrl.tiny.tokenizer import TOOLLESS_TEMPLATE_PREFIX

    template = tokenizer.chat_template or ""
    prefix = TOOLLESS_TEMPLATE_PREFIX if template.startswith(TOOLLESS_TEMPLATE_PREFIX) else ""
    body = template[len(prefix) :]
    if not has_generation_markers(body):
        tokenizer.chat_template = body
        try:
            body = get_training_chat_template(tokenizer) or body
        finally:
            tokenizer.chat_template = template
    if not context_only:
        return prefix + body
    if len([m for m in _GENERATION.finditer(body) if m.group(2)]) != 1:
        raise ValueError("assistant messages with loss=false need a chat template with one {% generation %} block")

    def split(match: re.Match) -> str:
        comment, opening, inner, closing = match.groups()
        if comment:
            return comment
        return (
            "{%- if message.loss is defined and message.loss is false %}" + inner
            + "{%- else %}" + opening + inner + closing + "{%- endif %}"
        )  # fmt: skip

    return prefix + _GENERATION.sub(split, body)


def _dataset(conversations: Sequence[dict[str, Any]]) -> Any:
    """A `datasets.Dataset` whose messages and tools keep their exact JSON shape.

    Arrow would otherwise merge the argument dicts of different tools into one struct type and fill the missing
    keys with nulls, which the chat template would then render into the tool calls.
    """
    from datasets import Dataset, Features, Json, List

    features = Features({"messages": List(Json()), "tools": List(Json())})
    rows = [{"messages": list(c["messages"]), "tools": list(c.get("tools") or [])} for c in conversations]
    return Dataset.from_list(rows, features=features)


def _stop_at_loss(threshold: float) -> Any:
    """A trainer callback that ends training at the first logged (window-averaged) loss below `threshold`."""
    from transformers import TrainerCallback

    class StopAtLoss(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
            if logs and "loss" in logs and logs["loss"] < threshold:
                control.should_training_stop = True

    return StopAtLoss()
