#!/usr/bin/env bash
# Set up a fresh Debian/Ubuntu machine for agentrl: the system packages the sandbox and the GUI toolset need
# (bubblewrap, chromium), then a virtual environment in .venv with agentrl and its development extras. The test
# environments beside it (.venv-vllm, .venv-compat) are made by scripts/test.sh when it first needs them.
# Elsewhere: install bubblewrap and chromium with your package manager, then run
#   python3 -m venv .venv && . .venv/bin/activate && pip install -c constraints.txt -e ".[dev]"
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

# pip's output, read as it comes: on a terminal one line that says what is being installed, elsewhere a line when
# each phase starts; all of it goes to the log.
progress() {
    local line name seen="" tty=0 n=0
    [ -t 1 ] && tty=1
    while IFS= read -r line; do
        case $line in
            Collecting\ *)
                n=$((n + 1)); name=${line#Collecting }; show resolving "$n: ${name%% *}" ;;
            *Downloading\ *.metadata\ *) ;;
            *Downloading\ *)
                show downloading "${line##*Downloading }" ;;
            Installing\ collected\ packages:*)
                name=${line//[^,]/}; show installing "$((${#name} + 1)) packages" ;;
        esac
    done
    [ $tty = 0 ] || printf '\r\033[K'
}

show() {  # a phase and what it is doing now
    if [ "${tty:-0}" = 1 ]; then
        printf '\r\033[K  %s %.*s' "$1" $(($(tput cols 2>/dev/null || echo 80) - ${#1} - 4)) "$2"
    elif [[ " $seen " != *" $1 "* ]]; then
        echo "  $1 ..."
        seen+=" $1"
    fi
}

python3 -m venv .venv
. .venv/bin/activate
log=.venv/setup.log
echo "setup: installing agentrl and its development extras into .venv (pip's output: $log)"
SECONDS=0
python -m pip install -q --upgrade pip
# constraints.txt pins the CPU build of torch; without it pip pulls several GB of CUDA wheels.
if ! pip install -c constraints.txt -e ".[dev]" 2>&1 | tee "$log" | progress; then
    echo "setup: pip failed; the end of $log:" >&2
    tail -n 20 "$log" >&2
    exit 1
fi
echo "setup: done in $((SECONDS / 60))m$((SECONDS % 60))s; now: . .venv/bin/activate && agentrl train"
