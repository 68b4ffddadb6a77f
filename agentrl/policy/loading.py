"""Load the policy model and tokenizer named by a `PolicyConfig`, and build the sampler backend over it.

`tiny`, `tiny-extended` and `tiny-swe` resolve to the checkpoints shipped inside the package; anything else is a
local path or a hub id. `policy.local_files_only` (on by default when `HF_HUB_OFFLINE` is set) reaches every
`from_pretrained` (model, its generation config and adapters, tokenizer): nothing is downloaded, and a hub id that is
not in the local cache fails at once with an `InputError` saying how to download it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from agentrl.errors import InputError
from agentrl.policy.config import PolicyConfig

OFFLINE_ENV = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
"""Either set to 1/true/yes/on puts the hub libraries offline; then `policy.local_files_only=None` means true."""


def resolve_model_path(name: str) -> str:
    """`tiny` / `tiny-extended` / `tiny-swe` → the shipped checkpoint directory; a local directory or a hub id
    passes through unchanged. A name that can only be a path (`/…`, `./…`, `~/…`, `a/b/c`) and names no directory
    is an `InputError` at once, before anything asks the hub about it."""
    from agentrl.tiny import SHIPPED

    if name in SHIPPED:
        if not (SHIPPED[name] / "config.json").exists():
            raise FileNotFoundError(
                f"the shipped {name} policy is missing from {SHIPPED[name]}; rebuild it with "
                "`python -m agentrl.tiny.build`"
            )
        return str(SHIPPED[name])
    path = Path(name).expanduser()
    if path.is_file():
        raise InputError(f"model {name!r} is a file; give the checkpoint's directory (the one holding config.json)")
    if not path.exists() and looks_like_path(name):
        raise InputError(f"model {name!r}: no such directory (a local checkpoint, or a hub id such as Org/Model)")
    return str(path) if path.exists() else name


def looks_like_path(name: str) -> bool:
    """Whether `name` can only be a filesystem path, never a hub id (`Org/Model`)."""
    return name.startswith(("/", ".", "~")) or name.count("/") > 1 or name.endswith("/") or "\\" in name


def resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def resolve_local_files_only(setting: bool | None) -> bool:
    """`policy.local_files_only`, with None read as "is the hub offline" ($HF_HUB_OFFLINE, at call time)."""
    if setting is not None:
        return setting
    return any(os.environ.get(name, "").upper() in ("1", "ON", "YES", "TRUE") for name in OFFLINE_ENV)


def not_cached(model: str) -> InputError:
    """The error for a hub id that is not in the local cache while downloads are off."""
    return InputError(
        f"model {model!r} is not in the local hub cache and downloads are off (policy.local_files_only, or "
        f"HF_HUB_OFFLINE); download it first: hf download {model}"
    )


def load_tokenizer(path: str, *, local_files_only: bool | None = None) -> Any:
    """The checkpoint's tokenizer, exactly as its `tokenizer.json` defines it; `local_files_only` as
    `policy.local_files_only`.

    transformers maps some model types (qwen2 among them) to a tokenizer class that rebuilds the pre-tokenizer
    from its own defaults, whatever `tokenizer.json` says; the tiny policy splits numbers into chunks of three, so
    that would silently tokenize its digits differently from training. When the file disagrees with the class, the
    file wins.
    """
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    offline = resolve_local_files_only(local_files_only)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=offline)
    except OSError as e:
        if offline and not Path(path).exists():
            raise not_cached(path) from e
        raise
    spec = Path(path) / "tokenizer.json"
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if spec.is_file() and backend is not None:
        saved = json.loads(spec.read_text()).get("pre_tokenizer")
        if json.loads(backend.to_str()).get("pre_tokenizer") != saved:
            tokenizer = PreTrainedTokenizerFast.from_pretrained(path, local_files_only=offline)
    return tokenizer


def load_model_and_tokenizer(config: PolicyConfig, *, trainable: bool = True) -> tuple[Any, Any]:
    """Load (model, tokenizer); wrap the model with LoRA and activation checkpointing when configured.

    `policy.dtype=auto` loads a model to train in float32, the values the learner's fp32 master weights start
    from (under `trainer.precision=bf16-mixed` the learner then casts the parameters to bf16); a model loaded only to
    sample from (`trainable=False`) has no updates to keep, so auto keeps its weights in bf16 on a GPU (half the
    memory) and float32 on the CPU. `policy.gradient_checkpointing=true` turns activation checkpointing on in every
    decoder layer here; None leaves the choice to the learner, which decides by memory
    (`agentrl/train/checkpointing_policy.py`).
    """
    import torch
    from transformers import AutoModelForCausalLM

    from agentrl.errors import ConfigError

    path = resolve_model_path(config.model)
    device = resolve_device(config.device)
    dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if config.dtype != "auto" and config.dtype not in dtypes:
        raise ConfigError(f"unknown policy.dtype {config.dtype!r}; known: auto, {', '.join(dtypes)}")
    dtype = dtypes.get(config.dtype)
    if dtype is None:
        dtype = torch.float32 if trainable or device == "cpu" else torch.bfloat16
    offline = resolve_local_files_only(config.local_files_only)
    try:
        tokenizer = load_tokenizer(path, local_files_only=offline)
        # the generation config, and the base model of a LoRA adapter folder, load under the same flag
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, local_files_only=offline)
    except OSError as e:
        if offline and not Path(path).exists():
            raise not_cached(config.model) from e
        where = "a local path or the local hub cache" if offline else "a local path, the local hub cache or the hub"
        raise FileNotFoundError(f"could not load model {config.model!r} from {where}: {e}") from e
    model.to(device)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    if trainable and config.gradient_checkpointing:
        # transformers 5.24 renamed it (the old name warns, then goes in v6)
        enable = getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable
        enable()
        model.config.use_cache = False
    if trainable and config.lora_rank > 0:
        from peft import LoraConfig, get_peft_model

        lora = LoraConfig(
            r=config.lora_rank,
            lora_alpha=config.lora_alpha,
            target_modules=list(config.lora_target_modules),
            task_type="CAUSAL_LM",
        )
        model = get_peft_model(model, lora)
    return model, tokenizer


def context_window(model: Any) -> int | None:
    """The positions `model` was built for (its config's `max_position_embeddings`); None where it does not say.

    Nothing stops a rotary-embedding model from running past them, but what it samples there it never trained on,
    so the trainer reports how many episodes go beyond (`tokens/past_context`)."""
    window = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    return int(window) if isinstance(window, int) and window > 0 else None


def past_context_warning(max_tokens_per_episode: int, window: int | None) -> str | None:
    """The warning for an episode budget beyond the model's context window; None when it fits or is unknown."""
    if window is None or max_tokens_per_episode <= window:
        return None
    return (
        f"warning: rollout.max_tokens_per_episode ({max_tokens_per_episode}) exceeds the model's context window "
        f"({window} positions); what an episode samples past it the model never trained on (metric tokens/past_context)"
    )


ATTENTION_LAYERS = frozenset({"full_attention", "sliding_attention", "chunked_attention"})
RECURRENT_MODEL_TYPES = frozenset({"mamba", "mamba2", "falcon_mamba", "rwkv", "recurrent_gemma", "xlstm"})


def recurrent_layers(model_config: Any) -> list[str]:
    """The kinds of layer of a transformers model config that carry a recurrent state instead of a key-value cache
    (LFM2's convolutions, Mamba and linear-attention layers of hybrid models); empty for attention-only models."""
    if getattr(model_config, "model_type", None) in RECURRENT_MODEL_TYPES:
        return [model_config.model_type]
    return sorted({kind for kind in getattr(model_config, "layer_types", None) or () if kind not in ATTENTION_LAYERS})


def check_in_process_sampler(model_config: Any) -> None:
    """Raise `ConfigError` when the in-process sampler (`policy.backend=transformers`) cannot sample from this model:
    its batched decoding joins, drops and trims the rows of a key-value cache, which recurrent layers do not have."""
    from agentrl.errors import ConfigError

    recurrent = recurrent_layers(model_config)
    if recurrent:
        raise ConfigError(
            f"policy.backend=transformers samples only from attention models, and this "
            f"{getattr(model_config, 'model_type', 'model')} has {', '.join(recurrent)} layers: sample with "
            "policy.backend=vllm, or from an inference server with policy.backend=openai (the learner trains it)"
        )


def check_architecture(config: PolicyConfig) -> None:
    """`check_in_process_sampler` from the model's config.json alone, before any weights load; a config that cannot
    be read passes (loading the model then says why, with its own advice)."""
    from transformers import AutoConfig

    path = resolve_model_path(config.model)
    try:
        model_config = AutoConfig.from_pretrained(
            path, local_files_only=resolve_local_files_only(config.local_files_only)
        )
    except (OSError, ValueError):
        return
    check_in_process_sampler(model_config)
