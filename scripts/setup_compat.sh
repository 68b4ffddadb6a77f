#!/usr/bin/env bash
# The compatibility environment, .venv-compat: agentrl with the oldest torch, transformers and trl it declares
# (constraints-compat.txt: a common GPU image's torch 2.11, transformers 5.17, trl 1.16), where scripts/test.sh runs
# the unit and integration tiers again, so code that calls an API those releases lack fails in CI rather than on a
# user's GPU. PyPI ships torch 2.11 only as its CUDA build (about 3 GB with its CUDA libraries); it runs on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."

# No copy of the wheels in pip's cache: CI's disk holds three environments at once, and this one is made once.
export PIP_NO_CACHE_DIR=1

# Disk it takes, measured: 8.1 GB at the peak of the install (the wheels and what they unpack to), 6.2 GB after.
# `--fits-disk`: exit 0 when the disk holds that, 1 when not, making nothing (scripts/test.sh asks before it makes room).
. scripts/disk_space.sh
needs_gb=9
venv=${AGENTRL_COMPAT_VENV:-.venv-compat}
place=$(dirname "$venv")
[ "${1:-}" = --fits-disk ] && { [ "$(free_gb "$place")" -ge "$needs_gb" ]; exit; }
require_free_gb setup_compat "$place" "$needs_gb" "$venv"

python3 -m venv "$venv"
. "$venv/bin/activate"
python -m pip install -q --upgrade pip
pip install -q -c constraints-compat.txt -e ".[dev]" >"$venv/setup.log" 2>&1 || {
    echo "setup_compat: pip failed; the end of $venv/setup.log:" >&2
    tail -n 20 "$venv/setup.log" >&2
    exit 1
}
python -c "import torch, transformers, trl; print('setup_compat: torch', torch.__version__, 'transformers', transformers.__version__, 'trl', trl.__version__)"
