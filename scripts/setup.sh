#!/usr/bin/env bash
# Set up a fresh Debian/Ubuntu machine for agentrl: the system packages the sandbox and the GUI toolset need
# (bubblewrap, chromium), then a virtual environment in .venv with agentrl and its development extras, then the
# vLLM test environment in .venv-vllm (scripts/setup_vllm.sh; skip it with --no-vllm).
# Elsewhere: install bubblewrap and chromium with your package manager, then run the venv lines by hand.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v bwrap >/dev/null || missing+=(bubblewrap)
command -v chromium >/dev/null || command -v chromium-browser >/dev/null || missing+=(chromium)
if [ ${#missing[@]} -gt 0 ]; then
    if ! command -v apt-get >/dev/null; then
        echo "setup: install ${missing[*]} with your package manager, then run this again" >&2
        exit 1
    fi
    SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

python3 -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
# constraints.txt pins the CPU build of torch; without it pip pulls several GB of CUDA wheels.
pip install -q -c constraints.txt -e ".[dev]"

if [ "${1:-}" != "--no-vllm" ]; then
    deactivate
    scripts/setup_vllm.sh
fi
