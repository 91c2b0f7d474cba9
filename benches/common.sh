# Sourced by the bench scripts (from the project's root): a scratch directory `$dir` and the
# processes in `pids`, stopped and removed on exit; `free_port` prints a free TCP port, and
# `free_cluster_port` one for a cluster node.

dir=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# A free port below Linux's ephemeral range (32768-60999) whose bus port (+10000) is free
# too: a cluster node's bus port must be at most 65535, and a port in the ephemeral range
# can be taken meanwhile by any outgoing connection.
free_cluster_port() {
    python3 -c '
import random, socket
for _ in range(1000):
    port = random.randrange(10000, 22768)
    try:
        for p in (port, port + 10000):
            with socket.socket() as s:
                s.bind(("127.0.0.1", p))
    except OSError:
        continue
    print(port)
    break
else:
    raise SystemExit("no free cluster port")
'
}
