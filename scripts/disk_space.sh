# Sourced by setup_vllm.sh and setup_compat.sh: a short disk is one line before pip starts, not ENOSPC halfway.

# free_gb DIR: whole gigabytes free on DIR's filesystem.
free_gb() { df -Pk "$1" | awk 'NR == 2 { print int($4 / 1048576) }'; }

# require_free_gb WHO DIR GB WHAT: exit 1, saying so in one line, when DIR's filesystem has less than GB free.
require_free_gb() {
    local free
    free=$(free_gb "$2")
    if [ "$free" -lt "$3" ]; then
        echo "$1: $4 needs about $3 GB of free disk, $free GB is free on $(df -P "$2" | awk 'NR == 2 { print $6 }')" >&2
        exit 1
    fi
}
