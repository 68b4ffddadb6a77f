"""The bundled tiny policies: 1.3M-parameter Qwen2 checkpoints warm-started on the bundled tasks.

`POLICY_DIR` (`--model tiny`) learned the code and search scaffolds; `EXTENDED_POLICY_DIR`
(`--model tiny-extended`) continued from it through echo drills and the easy tiers of the terminal, GUI and SWE
scaffolds (it copies names, labels and paths it never saw, at some cost on code and search); `SWE_POLICY_DIR`
(`--model tiny-swe`) continued from that through SWE drills with made-up operands and drills that retry after a
failed edit (worse on the terminal tier, the start of RL on the SWE easy tier). All three are directories
(`config.json`, `model.safetensors`, `tokenizer.json`, ...) that `python -m agentrl.tiny.build` rebuilds; load
them with `AutoModelForCausalLM.from_pretrained` and `agentrl.policy.loading.load_tokenizer` (transformers would
swap in Qwen2's digit handling).
"""

from pathlib import Path

POLICY_DIR = Path(__file__).parent / "policy"
EXTENDED_POLICY_DIR = Path(__file__).parent / "policy_extended"
SWE_POLICY_DIR = Path(__file__).parent / "policy_swe"
SHIPPED = {"tiny": POLICY_DIR, "tiny-extended": EXTENDED_POLICY_DIR, "tiny-swe": SWE_POLICY_DIR}
"""The names `--model` accepts for the shipped checkpoints."""
