#!/usr/bin/env bash
# The toy proxy beside nutcracker (twemproxy) in front of the same redis-servers, with the
# direct-to-server figure as the ceiling: redis-benchmark -P 16 -c 50 -n N, the targets run
# alternately, ROUNDS times. Not a test: a measurement, printed as Markdown tables of
# medians (requests per second, p50 and p99 latency in ms).
#
# Two set-ups. "one server": nutcracker with one server connection, our `static` pool
# (TOML) and our binary reading nutcracker's own YAML file (only the listen port differs),
# SET and GET. "three servers": a nutcracker pool of three servers (fnv1a_64, ketama,
# hash_tag, auto_eject_hosts), nutcracker and ours reading the same YAML file, SET, GET
# and MSET (ten keys, split across the servers).
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
cargo build -q --release -p redis-cluster-proxy

source benches/common.sh
server=$(free_port); twem=$(free_port); toy=$(free_port); toy_yml=$(free_port)
s1=$(free_port); s2=$(free_port); s3=$(free_port); twem3=$(free_port); toy3=$(free_port)

for port in "$server" "$s1" "$s2" "$s3"; do
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
        --logfile "$dir/redis-$port.log" &
    pids+=($!)
done
# nutcracker's file; ours reads the same text with its own listen port.
one() {
    cat <<YML
alpha:
  listen: 127.0.0.1:$1
  hash: fnv1a_64
  distribution: ketama
  redis: true
  preconnect: true
  server_connections: 1
  servers:
   - 127.0.0.1:$server:1
YML
}
three() {
    cat <<YML
beta:
  listen: 127.0.0.1:$1
  hash: fnv1a_64
  hash_tag: "{}"
  distribution: ketama
  auto_eject_hosts: true
  server_retry_timeout: 2000
  server_failure_limit: 3
  timeout: 400
  redis: true
  servers:
   - 127.0.0.1:$s1:1 server1
   - 127.0.0.1:$s2:1 server2
   - 127.0.0.1:$s3:1 server3
YML
}
one "$twem" >"$dir/nutcracker.yml"
one "$toy_yml" >"$dir/toy.yml"
three "$twem3" >"$dir/nutcracker3.yml"
three "$toy3" >"$dir/toy3.yml"
nutcracker -c "$dir/nutcracker.yml" -o "$dir/nutcracker.log" -s "$(free_port)" &
pids+=($!)
nutcracker -c "$dir/nutcracker3.yml" -o "$dir/nutcracker3.log" -s "$(free_port)" &
pids+=($!)
target/release/redis-cluster-proxy -c "$dir/toy.yml" -o "$dir/toy-yml.log" -s "$(free_port)" &
pids+=($!)
target/release/redis-cluster-proxy -c "$dir/toy3.yml" -o "$dir/toy3.log" -s "$(free_port)" &
pids+=($!)
cat >"$dir/toy.toml" <<TOML
[[pool]]
name = "bench"
kind = "static"
listen = "127.0.0.1:$toy"
servers = [{ address = "127.0.0.1:$server", slots = "0-16383" }]
TOML
target/release/redis-cluster-proxy "$dir/toy.toml" >"$dir/toy.log" 2>&1 &
pids+=($!)
for port in "$server" "$twem" "$toy" "$toy_yml" "$twem3" "$toy3"; do
    for _ in $(seq 100); do
        redis-cli -p "$port" PING 2>/dev/null | grep -q PONG && break
        sleep 0.1
    done
done

# One run: "test,rps,p50,p99" lines from redis-benchmark's CSV.
run() {
    redis-benchmark -h 127.0.0.1 -p "$1" -t "$2" -P 16 -c 50 -n "$N" -r 100000 --csv \
        | awk -F, 'NR > 1 { gsub(/"/, ""); print $1 "," $2 "," $5 "," $7 }'
}
results="$dir/results.csv"
for round in $(seq "$ROUNDS"); do
    for target in direct nutcracker toy-proxy toy-proxy-yml nutcracker-3 toy-proxy-yml-3; do
        tests=set,get
        case $target in
            direct) port=$server ;;
            nutcracker) port=$twem ;;
            toy-proxy) port=$toy ;;
            toy-proxy-yml) port=$toy_yml ;;
            nutcracker-3) port=$twem3; tests=set,get,mset ;;
            toy-proxy-yml-3) port=$toy3; tests=set,get,mset ;;
        esac
        run "$port" "$tests" | sed "s/^/$target,/" >>"$results"
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
def medians(target, test):
    runs = med[(target, test)]
    return [statistics.median(r[i] for r in runs) for i in range(3)]
print(f"redis-benchmark -P 16 -c 50 -n {n}, medians of {rounds} alternating rounds\n")
print("One server:\n")
print("| target | test | requests/s | share of direct | vs nutcracker | p50 ms | p99 ms |")
print("|---|---|---:|---:|---:|---:|---:|")
for test in ("SET", "GET"):
    direct = medians("direct", test)[0]
    twem = medians("nutcracker", test)[0]
    for target in ("direct", "nutcracker", "toy-proxy", "toy-proxy-yml"):
        rps, p50, p99 = medians(target, test)
        print(f"| {target} | {test} | {rps:,.0f} | {rps / direct:.2f} | {rps / twem:.2f} "
              f"| {p50:.3f} | {p99:.3f} |")
print("\nThree servers, one YAML file:\n")
print("| target | test | requests/s | vs nutcracker | p50 ms | p99 ms |")
print("|---|---|---:|---:|---:|---:|")
for test in ("SET", "GET", "MSET (10 keys)"):
    twem = medians("nutcracker-3", test)[0]
    for target in ("nutcracker-3", "toy-proxy-yml-3"):
        rps, p50, p99 = medians(target, test)
        print(f"| {target} | {test} | {rps:,.0f} | {rps / twem:.2f} | {p50:.3f} | {p99:.3f} |")
PY
