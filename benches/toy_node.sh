#!/usr/bin/env bash
# One toy node beside one real redis-server (issue #6's performance goal): both are
# cluster-enabled nodes that own all 16384 slots, and `redis-benchmark -t set,get -P 16
# -n N` runs against one, then the other, ROUNDS times. Not a test: a measurement, printed
# as a Markdown table of medians with the toy node's share of the real server's throughput
# (the goal is at least 0.50 on both commands).
#
#   bash benches/toy_node.sh            # N = 1000000, ROUNDS = 3
#   N=200000 ROUNDS=1 bash benches/toy_node.sh
#   EXTRA="-r 100000 -c 50" bash benches/toy_node.sh   # more arguments for redis-benchmark
#
# Needs redis-server and redis-benchmark (Debian: redis-server redis-tools); installs the
# peers with .ci/peers.sh (apt-get) when they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-1000000}
ROUNDS=${ROUNDS:-3}
EXTRA=${EXTRA:-}

# The same installer as CI's.
source .ci/peers.sh
install_peers
cargo build -q --release --example toy-node

source benches/common.sh
real=$(free_port); real_bus=$(free_port); toy=$(free_port); toy_bus=$(free_port)

redis-server --port "$real" --cluster-port "$real_bus" --cluster-enabled yes \
    --cluster-config-file nodes-real.conf --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$dir" --logfile "$dir/redis.log" &
pids+=($!)
target/release/examples/toy-node --port "$toy" --cluster-port "$toy_bus" \
    --cluster-config-file nodes-toy.conf --dir "$dir" --loglevel warning 2>"$dir/toy.log" &
pids+=($!)
for port in "$real" "$toy"; do
    for _ in $(seq 100); do
        redis-cli -p "$port" PING 2>/dev/null | grep -q PONG && break
        sleep 0.1
    done
    redis-cli -p "$port" CLUSTER ADDSLOTSRANGE 0 16383 | grep -q OK
    for _ in $(seq 100); do
        redis-cli -p "$port" CLUSTER INFO | grep -q cluster_state:ok && break
        sleep 0.1
    done
done

# One run: "test,rps,p50,p99" lines from redis-benchmark's CSV.
run() {
    # shellcheck disable=SC2086 # EXTRA is a list of arguments
    redis-benchmark -h 127.0.0.1 -p "$1" -t set,get -P 16 -n "$N" $EXTRA --csv \
        | awk -F, 'NR > 1 { gsub(/"/, ""); print $1 "," $2 "," $5 "," $7 }'
}
results="$dir/results.csv"
for round in $(seq "$ROUNDS"); do
    for target in redis-server toy-node; do
        port=$real; [ "$target" = toy-node ] && port=$toy
        run "$port" | sed "s/^/$target,/" >>"$results"
        echo "round $round: $target done" >&2
    done
done

python3 - "$results" "$N" "$ROUNDS" "$EXTRA" <<'PY'
import csv, statistics, sys
rows = list(csv.reader(open(sys.argv[1])))
n, rounds, extra = sys.argv[2], sys.argv[3], sys.argv[4]
runs = {}
for target, test, rps, p50, p99 in rows:
    runs.setdefault((target, test), []).append((float(rps), float(p50), float(p99)))
def medians(target, test):
    return [statistics.median(r[i] for r in runs[(target, test)]) for i in range(3)]
print(f"redis-benchmark -t set,get -P 16 -n {n} {extra}, medians of {rounds} alternating rounds\n")
print("| target | test | requests/s | share of redis-server | p50 ms | p99 ms |")
print("|---|---|---:|---:|---:|---:|")
for test in ("SET", "GET"):
    real = medians("redis-server", test)[0]
    for target in ("redis-server", "toy-node"):
        rps, p50, p99 = medians(target, test)
        print(f"| {target} | {test} | {rps:,.0f} | {rps / real:.2f} | {p50:.3f} | {p99:.3f} |")
PY
