# Sourced by the scripts in .ci/: installs the real peers that the tests talk to.

# Debian's redis-server, redis-tools (redis-cli, redis-benchmark) and nutcracker (twemproxy),
# when they are not already on PATH.
install_peers() {
    install_redis_py
    local missing=()
    command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
    if ! command -v redis-cli >/dev/null 2>&1 || ! command -v redis-benchmark >/dev/null 2>&1; then
        missing+=(redis-tools)
    fi
    command -v nutcracker >/dev/null 2>&1 || missing+=(nutcracker)
    if [ ${#missing[@]} -eq 0 ]; then
        return 0
    fi
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        sudo=(sudo)
    fi
    echo "installing ${missing[*]}"
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
}

# redis-py 8 (RESP3 by default), which tests/redis_py.rs runs through the proxy.
install_redis_py() {
    if python3 -c 'import sys, redis; sys.exit(0 if redis.__version__.startswith("8.") else 1)' \
        2>/dev/null; then
        return 0
    fi
    echo "installing redis-py 8.1.0"
    python3 -m pip install -q --disable-pip-version-check "redis==8.1.0"
}
