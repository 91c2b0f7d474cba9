#!/usr/bin/env bash
# The cluster bus's traffic on real servers, to set beside the simulator's (the `scale`
# example of redis-cluster-sim) and the model of semantics section 9. Starts N real
# redis-server nodes on 127.0.0.1 (ports BASE … BASE+N-1, bus ports +10000), creates the
# cluster with `redis-cli --cluster create --cluster-replicas 1`, waits for cluster_state:ok
# everywhere, lets it settle, then reads every node's CLUSTER INFO message counters twice,
# MEASURE seconds apart, and prints messages (and pings, pongs) sent per node per second.
# Not a test: a measurement. The servers are stopped by PID at the end.
#
#   bash benches/gossip_live.sh 100 15000            # N = 100, node timeout 15 s
#   SETTLE=30 MEASURE=60 BASE=21000 bash benches/gossip_live.sh 300 30000
#
# Needs redis-server and redis-cli (Debian: redis-server redis-tools); installs them with
# apt-get when missing. 300 nodes take about 3 GB and keep both cores busy.
set -euo pipefail
N=${1:?a node count (at least 6)}
TIMEOUT=${2:?a node timeout in ms}
SETTLE=${SETTLE:-30}
MEASURE=${MEASURE:-60}
BASE=${BASE:-21000}

missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v redis-cli >/dev/null || missing+=(redis-tools)
if [ ${#missing[@]} -gt 0 ]; then
    sudo=(); [ "$(id -u)" -ne 0 ] && sudo=(sudo)
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi

dir=$(mktemp -d)
pids=()
stop() {
    [ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$dir"
}
trap stop EXIT

ports=()
for ((i = 0; i < N; i++)); do
    port=$((BASE + i))
    ports+=("$port")
    mkdir -p "$dir/$port"
    redis-server --port "$port" --bind 127.0.0.1 --cluster-enabled yes \
        --cluster-node-timeout "$TIMEOUT" --cluster-config-file nodes.conf --dir "$dir/$port" \
        --save '' --appendonly no --logfile "$dir/$port/log" >/dev/null 2>&1 &
    pids+=($!)
done
for port in "${ports[@]}"; do
    for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
done

hosts=()
for port in "${ports[@]}"; do hosts+=("127.0.0.1:$port"); done
timeout 600 redis-cli --cluster create "${hosts[@]}" --cluster-replicas 1 --cluster-yes \
    >"$dir/create.log" 2>&1 || { cat "$dir/create.log"; exit 1; }

for ((waited = 0; ; waited++)); do
    ok=0
    for port in "${ports[@]}"; do
        redis-cli -p "$port" cluster info 2>/dev/null | grep -q 'cluster_state:ok' && ok=$((ok + 1))
    done
    [ "$ok" -eq "$N" ] && break
    [ "$waited" -ge 300 ] && { echo "only $ok of $N nodes report cluster_state:ok" >&2; exit 1; }
    sleep 1
done
sleep "$SETTLE"

# Sums of the three counters over every node.
counters() {
    for port in "${ports[@]}"; do redis-cli -p "$port" cluster info; done | tr -d '\r' | awk -F: '
        /^cluster_stats_messages_sent:/ { all += $2 }
        /^cluster_stats_messages_ping_sent:/ { ping += $2 }
        /^cluster_stats_messages_pong_sent:/ { pong += $2 }
        END { print all, ping, pong }'
}
read -r all0 ping0 pong0 < <(counters)
sleep "$MEASURE"
read -r all1 ping1 pong1 < <(counters)
per() { awk -v d="$1" -v n="$N" -v s="$MEASURE" 'BEGIN { printf "%.2f", d / n / s }'; }
echo "| N | T | messages/s per node | pings/s | pongs/s |"
echo "|---:|---:|---:|---:|---:|"
echo "| $N | $((TIMEOUT / 1000)) s | $(per $((all1 - all0))) | $(per $((ping1 - ping0))) | $(per $((pong1 - pong0))) |"
