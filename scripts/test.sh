#!/usr/bin/env bash
# Every test agentrl has, in the three environments they run in (what CI runs after scripts/setup.sh):
#  1. .venv: the unit, integration and slow tiers (python -m pytest; the vllm tier skips itself there);
#  2. the installed wheel, outside the checkout (scripts/check_install.sh);
#  3. .venv-vllm: the vllm tier, agentrl's vLLM backends against vLLM's CPU build (scripts/setup_vllm.sh);
#  4. .venv-compat: the unit tier and the tests bound to torch, transformers and trl's APIs again, on the oldest
#     releases agentrl declares (scripts/setup_compat.sh; constraints-compat.txt).
# The two extra environments are made on first use (a few minutes each). Arguments go to every pytest run.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || { echo "test: no .venv here; run scripts/setup.sh first" >&2; exit 1; }

section() { echo; echo "== $1"; }

section "unit, integration and slow tiers (.venv)"
# pytest exits 5 when it collects nothing: that is a failure here too.
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"

section "the installed wheel, outside the checkout"
PATH="$PWD/.venv/bin:$PATH" scripts/check_install.sh --deps-from .venv

section "vllm tier (.venv-vllm)"
made_vllm=0
[ -x .venv-vllm/bin/python ] || { scripts/setup_vllm.sh; made_vllm=1; }
.venv-vllm/bin/python -m pytest -q -p no:cacheprovider -m vllm tests/vllm_tier "$@"

section "the unit tier and the version-bound tests on the oldest declared torch, transformers and trl (.venv-compat)"
if [ ! -x .venv-compat/bin/python ]; then
    # A disk too small for the three environments at once keeps the two it still needs: .venv-vllm goes if this run
    # made it (the next run makes it again), else setup_compat.sh says in one line how much space it lacks.
    if [ "$made_vllm" = 1 ] && ! scripts/setup_compat.sh --fits-disk; then
        echo "test: the disk cannot hold .venv-compat beside .venv-vllm; removing .venv-vllm, which this run made"
        rm -rf .venv-vllm
    fi
    scripts/setup_compat.sh
fi
# Beside the unit tier, the tests that call into torch, transformers and trl beyond loading the tiny policy: chat
# templates of real architectures, the sampler served and forked, weight sync, the trainer's API, data-parallel and
# FSDP2 learners. The sandbox, browser, tool-server and scaffold tests run once, in .venv (the whole integration tier
# again here would take CI past its hour).
.venv-compat/bin/python -m pytest -q -p no:cacheprovider -m "unit or integration or slow" "$@" \
    tests/unit \
    tests/integration/test_model_families.py tests/integration/test_gateway_families.py \
    tests/integration/test_serve.py tests/integration/test_openai_policy.py \
    tests/integration/test_branching_rollout.py tests/integration/test_notebook_api.py \
    tests/integration/test_weight_sync.py tests/integration/test_weight_sync_choice.py \
    tests/integration/test_scale_out.py tests/slow/test_fsdp.py
