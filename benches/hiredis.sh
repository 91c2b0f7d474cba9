#!/usr/bin/env bash
# hiredis (C) beside redis-resp's command decoders on the corpora of benches/resp.rs: the
# reference of issue 24 ("decode_command at or above hiredis on corpus a"). Not a test: a
# measurement, printed as a Markdown table of medians, MiB/s.
#
#   bash benches/hiredis.sh [ROUNDS]     (default 3 rounds, about two minutes)
#
# benches/hiredis/reader.c feeds a corpus to one hiredis redisReader in 16 KiB pieces (its own
# read size) and prints the median of 20 passes, twice: building hiredis's reply objects, and
# framing only (no reply functions: it finds where each reply ends, as our argv path does).
# It is built here against Debian's libhiredis-dev (installed when missing and run as root). Each round runs hiredis on
# every RESP2 corpus, then criterion on ours for corpus (a), so the two alternate.
set -euo pipefail
cd "$(dirname "$0")/.."
source benches/common.sh
rounds=${1:-3}

if [ ! -e /usr/include/hiredis/read.h ]; then
    if [ "$(id -u)" = 0 ]; then
        apt-get install -y libhiredis-dev >/dev/null || {
            apt-get update >/dev/null && apt-get install -y libhiredis-dev >/dev/null
        }
    else
        echo "libhiredis-dev is missing: apt-get install libhiredis-dev" >&2
        exit 1
    fi
fi
version=$(dpkg-query -W -f '${Version}' libhiredis-dev 2>/dev/null || echo unknown)
cc -O2 -Wall -Wextra benches/hiredis/reader.c -lhiredis -o "$dir/reader"

# The corpora, byte for byte those of benches/resp.rs.
RESP_BENCH_CORPORA="$dir/corpora" cargo bench -q --bench resp -- --list >/dev/null
corpora=(a_pipelined_set b_bulk_1k c_int_arrays c2_mixed_int_arrays)
ours=("redis-resp argv" "redis-resp argv slice" "redis-resp slice" "redis-resp BytesMut")

median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
mib_s() { awk -v bytes="$1" -v ns="$2" 'BEGIN {printf "%.0f", bytes / (ns / 1e9) / 1048576}'; }

for round in $(seq "$rounds"); do
    for corpus in "${corpora[@]}"; do
        for mode in objects framing; do
            "$dir/reader" "$dir/corpora/$corpus.resp" "$(cat "$dir/corpora/$corpus.values")" \
                20 "$mode" >>"$dir/hiredis.$mode.$corpus"
        done
    done
    bytes=$(stat -c %s "$dir/corpora/a_pipelined_set.resp")
    cargo bench -q --bench resp -- --output-format bencher --warm-up-time 1 \
        --measurement-time 3 '^a_pipelined_set/redis-resp' 2>/dev/null | grep '^test' |
        while read -r _ name; do
            path=${name%% ...*}
            ns=$(sed -E 's/.*bench: *([0-9,]+) ns.*/\1/; s/,//g' <<<"$name")
            mib_s "$bytes" "$ns" >>"$dir/ours.${path##*/}"
            echo >>"$dir/ours.${path##*/}"
        done
    echo "round $round of $rounds done" >&2
done

echo
echo "| corpus | contender | MiB/s (median of $rounds rounds) |"
echo "|---|---|---:|"
for corpus in "${corpora[@]}"; do
    for mode in objects framing; do
        echo "| $corpus | hiredis $version, $mode | $(median <"$dir/hiredis.$mode.$corpus") |"
    done
done
for name in "${ours[@]}"; do
    [ -s "$dir/ours.$name" ] || continue
    echo "| a_pipelined_set | $name | $(grep . "$dir/ours.$name" | median) |"
done
