"""Randomly initialised tiny models of real architectures, each with its family's chat template, special tokens and
end-of-turn ids: test doubles for real models, small enough for a CPU.

    model, tokenizer = family_model("qwen3")          # Qwen3 architecture, trl's Qwen3 template, <think> tokens
    path = save_family_model("llama3", tmp_path)      # a directory `--model PATH` loads

The vocabulary is the shipped tiny tokenizer's plus the family's special tokens; the templates come from trl
(`trl.chat_template_utils`), except the Mistral-style one, which ships here (`templates/mistral_tools.jinja`)
because trl has none. Generation configs list every end-of-turn id as the real models do (Qwen: `<|im_end|>` and
`<|endoftext|>`; Llama 3: `<|end_of_text|>`, `<|eom_id|>`, `<|eot_id|>`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

TEMPLATES = Path(__file__).parent / "templates"


@dataclass(frozen=True)
class Family:
    """What makes a model family's chat format: architecture, template, special tokens, end-of-turn ids."""

    architecture: str
    """A transformers model class name."""
    template: str
    """A `trl.chat_template_utils` attribute, or a file under `templates/`."""
    special_tokens: tuple[str, ...]
    eos_token: str
    """The token that ends an assistant turn in the template (the tokenizer's `eos_token`)."""
    generation_eos: tuple[str, ...]
    """Every token the generation config lists as end of sequence."""
    bos_token: str | None = None
    added_tokens: tuple[str, ...] = ()
    """Tokens the real tokenizer adds as ordinary (not special) ones: `<think>`, `<tool_call>`, ..."""
    config: tuple[tuple[str, Any], ...] = ()
    """Architecture settings of the small model (LFM2: one convolution layer, one attention layer)."""


_QWEN = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
_QWEN_TOOLS = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>")
_LLAMA = (
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|python_tag|>",
)
_MISTRAL = (
    "<s>",
    "</s>",
    "[INST]",
    "[/INST]",
    "[TOOL_CALLS]",
    "[AVAILABLE_TOOLS]",
    "[/AVAILABLE_TOOLS]",
    "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]",
)

_LFM2 = ("<|startoftext|>", "<|im_start|>", "<|im_end|>", "<|tool_call_start|>", "<|tool_call_end|>")

FAMILIES = {
    "qwen2": Family(
        "Qwen2ForCausalLM", "qwen2_5_chat_template", _QWEN, "<|im_end|>", ("<|im_end|>", "<|endoftext|>"),
        added_tokens=_QWEN_TOOLS,
    ),
    "qwen3": Family(
        "Qwen3ForCausalLM", "qwen3_chat_template", _QWEN, "<|im_end|>", ("<|im_end|>", "<|endoftext|>"),
        added_tokens=(*_QWEN_TOOLS, "<think>", "</think>"),
    ),
    "qwen3_coder": Family(
        "Qwen3ForCausalLM", "qwen3_5_think_chat_template", _QWEN, "<|im_end|>", ("<|im_end|>", "<|endoftext|>"),
        added_tokens=(*_QWEN_TOOLS, "<think>", "</think>"),
    ),
    "llama3": Family(
        "LlamaForCausalLM", "llama3_1_chat_template", _LLAMA, "<|eot_id|>",
        ("<|end_of_text|>", "<|eom_id|>", "<|eot_id|>"), bos_token="<|begin_of_text|>",
    ),
    "llama3_2": Family(
        "LlamaForCausalLM", "llama3_2_chat_template", _LLAMA, "<|eot_id|>",
        ("<|end_of_text|>", "<|eom_id|>", "<|eot_id|>"), bos_token="<|begin_of_text|>",
    ),
    "mistral": Family(
        "MistralForCausalLM", "mistral_tools.jinja", _MISTRAL, "</s>", ("</s>",), bos_token="<s>",
    ),
    "lfm2": Family(
        "Lfm2ForCausalLM", "lfm2_2_5_chat_template", _LFM2, "<|im_end|>", ("<|im_end|>",),
        bos_token="<|startoftext|>", added_tokens=("<think>", "</think>"),
        config=(("layer_types", ["conv", "full_attention"]),),
    ),
}  # fmt: skip


def family_template(family: Family) -> str:
    if family.template.endswith(".jinja"):
        return (TEMPLATES / family.template).read_text()
    from trl import chat_template_utils

    return getattr(chat_template_utils, family.template)


def family_tokenizer(name: str) -> Any:
    """The shipped tiny tokenizer with family `name`'s special tokens, template and end-of-turn token."""
    from agentrl.policy.loading import load_tokenizer
    from agentrl.tiny import POLICY_DIR

    family = FAMILIES[name]
    tokenizer = load_tokenizer(str(POLICY_DIR))
    tokenizer.add_special_tokens({"additional_special_tokens": list(family.special_tokens)})
    if family.added_tokens:
        tokenizer.add_tokens(list(family.added_tokens))
    tokenizer.eos_token = family.eos_token
    if family.bos_token is not None:
        tokenizer.bos_token = family.bos_token
    tokenizer.pad_token = family.special_tokens[0] if name.startswith("qwen") else family.eos_token
    tokenizer.chat_template = family_template(family)
    return tokenizer


def family_model(name: str, *, seed: int = 0, hidden_size: int = 64, layers: int = 2) -> tuple[Any, Any]:
    """(a randomly initialised model of family `name`'s architecture, its tokenizer); fp32, same seed same weights."""
    import torch
    import transformers

    family = FAMILIES[name]
    tokenizer = family_tokenizer(name)
    model_class = getattr(transformers, family.architecture)
    config = model_class.config_class(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=hidden_size // 4,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=[tokenizer.convert_tokens_to_ids(t) for t in family.generation_eos],
        **dict(family.config),
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_class(config)
    model.generation_config = transformers.GenerationConfig(
        eos_token_id=[tokenizer.convert_tokens_to_ids(t) for t in family.generation_eos],
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
    )
    return model, tokenizer


def save_family_model(name: str, directory: str | Path, **options: Any) -> Path:
    """`family_model(name)` saved as a checkpoint directory (model, tokenizer, generation config)."""
    model, tokenizer = family_model(name, **options)
    path = Path(directory)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
