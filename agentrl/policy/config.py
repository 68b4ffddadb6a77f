"""`PolicyConfig`: the model being trained or evaluated, and the sampler backend over it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PolicyConfig:
    """The model being trained (or evaluated) and how it samples."""

    model: str = "tiny"
    """Model to train: `tiny` (the shipped tiny policy: code, search), `tiny-extended` (its stage trained on the
    easy tiers of terminal, GUI and SWE too), `tiny-swe` (that stage trained further on SWE drills), a local
    checkpoint path, or a hub id already cached."""
    backend: str = "transformers"
    """Sampler backend: `transformers` (in-process), `vllm` (an in-process vLLM engine on the GPU, weights synced
    from the learner each step; the `vllm` extra) or `openai` (an OpenAI-compatible completions server)."""
    base_url: str | None = None
    """Base URL of the OpenAI-compatible server for the `openai` backend."""
    api_key: str | None = None
    """API key for the `openai` backend (defaults to $OPENAI_API_KEY, then `EMPTY`)."""
    device: str = "auto"
    """Torch device for the in-process model: `auto`, `cpu`, `cuda`, `cuda:1`, ..."""
    dtype: str = "auto"
    """Weights dtype: `auto` (float32 on CPU, bfloat16 on GPU), `float32`, `bfloat16`, `float16`."""
    max_batch_size: int = 128
    """Most generation requests the in-process sampler batches into one forward pass."""
    batch_wait_ms: float = 2.0
    """How long the sampler waits for more requests before starting a batch."""
    lora_rank: int = 0
    """LoRA rank (peft); 0 trains all parameters."""
    lora_alpha: int = 32
    """LoRA alpha."""
    lora_target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    """Modules LoRA adapts."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass to save memory."""
