"""The `vllm` tier: agentrl's vLLM backends against vLLM itself (its CPU build, in the environment
`scripts/setup_vllm.sh` makes: `.venv-vllm`). Outside that environment every module here is skipped.

The engines are kept small, so the tier runs in minutes on 2 cores: 1 GiB of KV cache, a short `max_model_len`,
no CUDA graphs (the CPU build has none), one engine per module.
"""

from __future__ import annotations

import os

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB of KV cache per engine
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
