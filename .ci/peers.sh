# Sourced by the scripts in .ci/: installs the real peers that the tests talk to.

# Debian's redis-server, redis-tools (redis-cli, redis-benchmark) and nutcracker (twemproxy),
# when they are not already on PATH.
install_peers() {
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
