#!/usr/bin/env bash
# Our proxy (the redis-cluster-client engine) beside predixy (../shared/peers/predixy, one
# worker thread) in two set-ups: in front of the same real 3-master Redis Cluster (our
# cluster pool, predixy's ClusterServerPool), and in front of one standalone redis-server
# (our static pool with every slot, predixy's StandaloneServerPool with RefreshMethod fixed).
# redis-benchmark -P 16 -c 50 -n N: SET, GET and a 10-key MGET (random keys, so that in the
# cluster it is split over the masters), the proxies run alternately, ROUNDS times. Not a
# test: a measurement, printed as a Markdown table of medians of requests per second, of
# the proxy's own CPU time per request (utime + stime from /proc/PID/stat over the run,
# divided by the requests) and of redis-benchmark's p99 latency.
#
#   bash benches/cluster_proxy.sh            # N = 300000, ROUNDS = 3
#   N=100000 ROUNDS=1 bash benches/cluster_proxy.sh
#
# Needs redis-server, redis-cli and redis-benchmark (Debian: redis-server redis-tools).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-300000}
ROUNDS=${ROUNDS:-3}
predixy=${PREDIXY:-../shared/peers/predixy/predixy}
source .ci/peers.sh
install_peers
cargo build -q --release -p redis-cluster-proxy

source benches/common.sh
nodes=()
for _ in 1 2 3; do
    port=$(free_cluster_port)
    mkdir -p "$dir/$port"
    redis-server --port "$port" --bind 127.0.0.1 --cluster-enabled yes --save '' \
        --appendonly no --dir "$dir/$port" --logfile "$dir/$port/log" &
    pids+=($!)
    nodes+=("127.0.0.1:$port")
done
# Each node answers before the cluster is formed (a fixed pause was too short once).
for node in "${nodes[@]}"; do
    for _ in $(seq 100); do
        if redis-cli -p "${node##*:}" ping >/dev/null 2>&1; then break; fi
        sleep 0.05
    done
done
redis-cli --cluster create "${nodes[@]}" --cluster-yes >/dev/null
for _ in $(seq 100); do
    if redis-cli -p "${nodes[0]##*:}" cluster info | grep -q 'cluster_state:ok'; then break; fi
    sleep 0.1
done

ours=$(free_port); theirs=$(free_port)
printf '[[pool]]\nname = "bench"\nlisten = "127.0.0.1:%s"\nseeds = ["%s"]\n' \
    "$ours" "${nodes[0]}" >"$dir/ours.toml"
target/release/redis-cluster-proxy "$dir/ours.toml" >"$dir/ours.log" 2>&1 &
ours_pid=$!; pids+=($ours_pid)
cat >"$dir/predixy.conf" <<CONF
Name bench
Bind 127.0.0.1:$theirs
WorkerThreads 1
ClientTimeout 300
LogVerbSample 0
LogDebugSample 0
LogInfoSample 0
LogNoticeSample 0
LogWarnSample 1
LogErrorSample 1
ClusterServerPool {
    RefreshInterval 1
    ServerTimeout 1
    Servers {
        + ${nodes[0]}
    }
}
CONF
"$predixy" "$dir/predixy.conf" >"$dir/predixy.log" 2>&1 &
theirs_pid=$!; pids+=($theirs_pid)

# The one-server set-up.
single=$(free_port)
mkdir -p "$dir/$single"
redis-server --port "$single" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir/$single" \
    --logfile "$dir/$single/log" &
pids+=($!)
ours_one=$(free_port); theirs_one=$(free_port)
printf '[[pool]]\nname = "one"\nkind = "static"\nlisten = "127.0.0.1:%s"\n' "$ours_one" \
    >"$dir/ours_one.toml"
printf 'servers = [{ address = "127.0.0.1:%s", slots = "0-16383" }]\n' "$single" \
    >>"$dir/ours_one.toml"
target/release/redis-cluster-proxy "$dir/ours_one.toml" >"$dir/ours_one.log" 2>&1 &
ours_one_pid=$!; pids+=($ours_one_pid)
sed -e "s/^Bind .*/Bind 127.0.0.1:$theirs_one/" -e '/^ClusterServerPool/,$d' \
    "$dir/predixy.conf" >"$dir/predixy_one.conf"
cat >>"$dir/predixy_one.conf" <<CONF
StandaloneServerPool {
    Databases 1
    Hash crc16
    HashTag "{}"
    Distribution modula
    RefreshMethod fixed
    ServerTimeout 1
    Group g1 {
        + 127.0.0.1:$single
    }
}
CONF
"$predixy" "$dir/predixy_one.conf" >"$dir/predixy_one.log" 2>&1 &
theirs_one_pid=$!; pids+=($theirs_one_pid)
sleep 1

# CPU ticks (utime + stime) of a process.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

mget=(mget)
for _ in $(seq 10); do mget+=(key:__rand_int__); done

results="$dir/results"
for round in $(seq "$ROUNDS"); do
    for target in predixy ours predixy-one ours-one; do
        case $target in
            predixy) port=$theirs; pid=$theirs_pid ;;
            ours) port=$ours; pid=$ours_pid ;;
            predixy-one) port=$theirs_one; pid=$theirs_one_pid ;;
            ours-one) port=$ours_one; pid=$ours_one_pid ;;
        esac
        for test in set get mget10; do
            case $test in
                mget10) what=("${mget[@]}") ;;
                *) what=(-t "$test") ;;
            esac
            before=$(ticks "$pid")
            # CSV: test, rps, avg, min, p50, p95, p99, max (latencies in ms).
            csv=$(redis-benchmark -h 127.0.0.1 -p "$port" -P 16 -c 50 -n "$N" -r 100000 \
                --csv "${what[@]}")
            after=$(ticks "$pid")
            read -r rps p99 < <(awk -F'","' 'NR == 2 { print $2, $7 }' <<<"$csv")
            us=$(python3 -c "print(round(($after - $before) / $hz * 1e6 / $N, 2))")
            echo "$target $test $rps $us $p99" >>"$results"
            echo "round $round: $target $test $rps req/s, $us µs CPU per request, p99 $p99 ms" >&2
        done
    done
done

python3 - "$results" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    target, test, rps, us, p99 = line.split()
    rows.setdefault((target, test), []).append((float(rps), float(us), float(p99)))
print("| proxy (-one: in front of one server) | test | requests/s | proxy CPU µs per request "
      "| p99 ms |")
print("|---|---|---:|---:|---:|")
for (target, test), runs in sorted(rows.items()):
    rps, us, p99 = (statistics.median(run[i] for run in runs) for i in range(3))
    print(f"| {target} | {test.upper()} | {rps:,.0f} | {us:.2f} | {p99:.3f} |")
PY
