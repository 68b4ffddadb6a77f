"""The tiny policy's architecture: a Qwen2 small enough to sample quickly on two CPU cores.

About a million parameters (1.3M as `agentrl.tiny.build` configures it: hidden size 128, 4 layers), tied
input/output embeddings, grouped-query attention. Rollout speed matters more than capacity here: the bundled tasks
need copying (numbers, names) and a few learned decisions, not knowledge.
"""

from __future__ import annotations

import torch
from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

from agentrl.tiny.tokenizer import EOS_TOKEN, PAD_TOKEN, SPECIAL_TOKENS

PAD_ID = SPECIAL_TOKENS.index(PAD_TOKEN)
EOS_ID = SPECIAL_TOKENS.index(EOS_TOKEN)


def tiny_qwen2_config(
    vocab_size: int,
    *,
    hidden_size: int = 192,
    num_hidden_layers: int = 4,
    num_attention_heads: int = 4,
    num_key_value_heads: int = 2,
    max_position_embeddings: int = 1024,
) -> Qwen2Config:
    """The config of the bundled policy for a tokenizer with `vocab_size` ids (this module's tokenizer)."""
    return Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=4 * hidden_size,
        num_hidden_layers=num_hidden_layers,
        num_attention_heads=num_attention_heads,
        num_key_value_heads=num_key_value_heads,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=PAD_ID,
        eos_token_id=EOS_ID,
        pad_token_id=PAD_ID,
        use_cache=True,
    )


def tiny_qwen2(config: Qwen2Config, *, seed: int = 0) -> Qwen2ForCausalLM:
    """A freshly initialised fp32 model; the same seed gives the same weights."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(eos_token_id=EOS_ID, pad_token_id=PAD_ID, bos_token_id=PAD_ID)
    return model.float()
