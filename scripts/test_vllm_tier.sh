#!/usr/bin/env bash
# The `vllm` test tier in its environment (.venv-vllm, made by scripts/setup_vllm.sh when missing): agentrl's vLLM
# backends against vLLM's CPU build. A few minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."

[ -x .venv-vllm/bin/python ] || scripts/setup_vllm.sh
.venv-vllm/bin/python -m pytest -q -p no:cacheprovider -m vllm tests/vllm_tier "$@"
