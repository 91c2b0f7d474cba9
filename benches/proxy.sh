#!/usr/bin/env bash
# The toy proxy beside nutcracker (twemproxy) in front of the same redis-server, with the
# direct-to-server figure as the ceiling: redis-benchmark -t set,get -P 16 -c 50 -n N,
# the three targets run alternately, ROUNDS times. Not a test: a measurement, printed as a
# Markdown table of medians (requests per second, p50 and p99 latency in ms).
#
#   bash benches/proxy.sh            # N = 1000000, ROUNDS = 3
#   N=200000 ROUNDS=1 bash benches/proxy.sh
#
# Needs redis-server, redis-benchmark and nutcracker (Debian: redis-server redis-tools
# nutcracker); installs them with apt-get when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-1000000}
ROUNDS=${ROUNDS:-3}

missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v redis-benchmark >/dev/null || missing+=(redis-tools)
command -v nutcracker >/dev/null || missing+=(nutcracker)
if [ ${#missing[@]} -gt 0 ]; then
    sudo=(); [ "$(id -u)" -ne 0 ] && sudo=(sudo)
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi
cargo build -q --release --example toy-proxy

dir=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
server=$(free_port); twem=$(free_port); toy=$(free_port)

redis-server --port "$server" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
    --logfile "$dir/redis.log" &
pids+=($!)
cat >"$dir/nutcracker.yml" <<YML
alpha:
  listen: 127.0.0.1:$twem
  hash: fnv1a_64
  distribution: ketama
  redis: true
  preconnect: true
  server_connections: 1
  servers:
   - 127.0.0.1:$server:1
YML
nutcracker -c "$dir/nutcracker.yml" -o "$dir/nutcracker.log" -s "$(free_port)" &
pids+=($!)
cat >"$dir/toy.toml" <<TOML
[[pool]]
name = "bench"
kind = "static"
listen = "127.0.0.1:$toy"
servers = [{ address = "127.0.0.1:$server", slots = "0-16383" }]
TOML
target/release/examples/toy-proxy "$dir/toy.toml" >"$dir/toy.log" 2>&1 &
pids+=($!)
for port in "$server" "$twem" "$toy"; do
    for _ in $(seq 100); do
        redis-cli -p "$port" PING 2>/dev/null | grep -q PONG && break
        sleep 0.1
    done
done

# One run: "test,rps,p50,p99" lines from redis-benchmark's CSV.
run() {
    redis-benchmark -h 127.0.0.1 -p "$1" -t set,get -P 16 -c 50 -n "$N" -r 100000 --csv \
        | awk -F, 'NR > 1 { gsub(/"/, ""); print $1 "," $2 "," $5 "," $7 }'
}
results="$dir/results.csv"
for round in $(seq "$ROUNDS"); do
    for target in direct nutcracker toy-proxy; do
        case $target in
            direct) port=$server ;;
            nutcracker) port=$twem ;;
            toy-proxy) port=$toy ;;
        esac
        run "$port" | sed "s/^/$target,/" >>"$results"
        echo "round $round: $target done" >&2
    done
done

# Medians per target and test, and the proxies' throughput as a share of direct.
python3 - "$results" "$N" "$ROUNDS" <<'PY'
import csv, statistics, sys
rows = list(csv.reader(open(sys.argv[1])))
n, rounds = sys.argv[2], sys.argv[3]
med = {}
for target, test, rps, p50, p99 in rows:
    med.setdefault((target, test), []).append((float(rps), float(p50), float(p99)))
print(f"redis-benchmark -t set,get -P 16 -c 50 -n {n}, medians of {rounds} alternating rounds\n")
print("| target | test | requests/s | share of direct | p50 ms | p99 ms |")
print("|---|---|---:|---:|---:|---:|")
for test in ("SET", "GET"):
    direct = statistics.median(r[0] for r in med[("direct", test)])
    for target in ("direct", "nutcracker", "toy-proxy"):
        runs = med[(target, test)]
        rps = statistics.median(r[0] for r in runs)
        p50 = statistics.median(r[1] for r in runs)
        p99 = statistics.median(r[2] for r in runs)
        print(f"| {target} | {test} | {rps:,.0f} | {rps / direct:.2f} | {p50:.3f} | {p99:.3f} |")
PY
