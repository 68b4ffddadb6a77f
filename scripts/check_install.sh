#!/usr/bin/env bash
# The first install as a user gets it: build the wheel, install it into a fresh virtual environment outside the
# checkout, and from another directory run what a newcomer runs first (agentrl doctor --model tiny, agentrl tools
# list, a 2-step agentrl train). Building and installing must print no warning. Run it from the development
# environment (it has `build`): . .venv/bin/activate && scripts/check_install.sh
#
# With --deps-from VENV the fresh environment takes the wheel alone (--no-deps) and finds its dependencies in VENV's
# site-packages (a path entry, so VENV's own .pth files, its editable agentrl among them, are not read): the check
# of what the wheel ships, in seconds instead of a download of every dependency. `pip check` still holds the
# wheel's declared requirements against what it finds. CI uses it; setup.sh already resolves the same pyproject.
set -euo pipefail
deps_from=
if [ "${1:-}" = "--deps-from" ]; then
    deps_from=$(cd "$2" && pwd)
fi
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/agentrl-install.XXXXXX")
trap 'rm -rf "$work"' EXIT

fail() {
    echo "check_install: $1; the end of its output:" >&2
    tail -n 40 "$2" >&2
    exit 1
}

warned() {  # the lines of a log that warn, deprecation notices included, less two the machine causes: byte-compiling
    # turned off by PYTHONDONTWRITEBYTECODE, and pip's note on a configured index that lacks a project
    grep -Ei "warn|deprecat" "$1" | grep -Ev "byte-compiling is disabled|^WARNING: Location '.*' is ignored"
}

step() {
    printf 'check_install: %-44s' "$1"
    SECONDS=0
}

step "build the wheel"
python -m build --wheel --outdir "$work/dist" "$root" >"$work/build.log" 2>&1 || fail "the build failed" "$work/build.log"
warned "$work/build.log" >&2 && fail "the build warned" "$work/build.log"
rm -rf "$root/build"  # setuptools' scratch directory, left in the checkout
echo "${SECONDS}s"

step "install it into a fresh venv"
python -m venv "$work/venv"
if [ -n "$deps_from" ]; then
    site=$("$work/venv/bin/python" -c "import sysconfig; print(sysconfig.get_path('purelib'))")
    "$deps_from/bin/python" -c "import sysconfig; print(sysconfig.get_path('purelib'))" >"$site/dependencies.pth"
    # the venv's own old setuptools would shadow the one the dependencies were installed with
    "$work/venv/bin/pip" uninstall -q -y setuptools >"$work/install.log" 2>&1
    "$work/venv/bin/pip" install -q --no-deps "$work"/dist/agentrl-*.whl >>"$work/install.log" 2>&1 ||
        fail "the install failed" "$work/install.log"
    "$work/venv/bin/pip" check >>"$work/install.log" 2>&1 || fail "the wheel's requirements are not met" "$work/install.log"
else
    # constraints.txt pins the CPU torch: pip reuses its wheel instead of pulling CUDA's.
    "$work/venv/bin/pip" install -q -c "$root/constraints.txt" "$work"/dist/agentrl-*.whl >"$work/install.log" 2>&1 ||
        fail "the install failed" "$work/install.log"
fi
warned "$work/install.log" >&2 && fail "the install warned" "$work/install.log"
echo "${SECONDS}s"

cd "$work"  # another directory: nothing may come from the checkout
export PATH="$work/venv/bin:$PATH"
unset PYTHONPATH VIRTUAL_ENV
python -c "import agentrl, sys; sys.exit(not agentrl.__file__.startswith('$work/venv/'))" ||
    fail "agentrl was not imported from the installed wheel" /dev/null

step "agentrl doctor --model tiny"
agentrl doctor --model tiny >"$work/doctor.log" 2>&1 || fail "agentrl doctor failed" "$work/doctor.log"
echo "${SECONDS}s"

step "agentrl tools list"
agentrl tools list >"$work/tools.log" 2>&1 || fail "agentrl tools list failed" "$work/tools.log"
grep -q "^code" "$work/tools.log" || fail "agentrl tools list lists no code toolset" "$work/tools.log"
echo "${SECONDS}s"

step "agentrl train trainer.steps=2"
agentrl train trainer.steps=2 eval.max_tasks=16 progress=false name=check output_dir="$work/runs" \
    >"$work/train.log" 2>&1 || fail "agentrl train failed" "$work/train.log"
for made in metrics.jsonl trajectories/step_000002.jsonl checkpoints/step_000002/policy/model.safetensors; do
    [ -e "$work/runs/check/$made" ] || fail "agentrl train wrote no $made" "$work/train.log"
done
echo "${SECONDS}s"
echo "check_install: ok"
