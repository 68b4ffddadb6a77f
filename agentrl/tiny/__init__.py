"""The bundled tiny policy: a few-million-parameter Qwen2 warm-started on the bundled tasks.

`POLICY_DIR` holds the checkpoint (`config.json`, `model.safetensors`, `tokenizer.json`, ...) that
`scripts/build_tiny_policy.py` rebuilds deterministically; load it with `AutoModelForCausalLM.from_pretrained` and
`agentrl.policy.loading.load_tokenizer` (transformers would swap in Qwen2's digit handling).
"""

from pathlib import Path

POLICY_DIR = Path(__file__).parent / "policy"
