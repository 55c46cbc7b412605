#!/usr/bin/env bash
# The training copy's fill rate (issue 39): vidfs copy of make bench-random's 24 videos (480p,
# bench/dataset10.sh) with the huff codec, --workers N: the wall time from asking to the copy
# whole, the frames it holds, frames a second, and the mount's CPU (/proc). Prints one line.
#   Usage: bench/fill_rate.sh [VIDFS [WORKERS]]   (defaults: bin/vidfs, 2)
set -euo pipefail
bin=${1:-bin/vidfs}
workers=${2:-2}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/vidfs/bench
src=$cache/dataset10-480p
"$(dirname "$0")/dataset10.sh" "$src" 480 >/dev/null 2>&1
w=$(mktemp -d)
trap 'fusermount3 -u -z "$w/m" 2>/dev/null; rm -rf "$w"' EXIT
mkdir -p "$w/m" "$w/c"
"$bin" mount "$src" "$w/m" --frames 16 --stride 2 --step 4 --size 224x224 --workers "$workers" --cache-mem 256MiB \
  --cache-dir "$w/c" --cache-keep copy --cache-disk-codec huff --probe-cache "$cache/fill-rate-probe" 2>"$w/log" &
pid=$!
for _ in $(seq 300); do [ -e "$w/m/.vidfs/stats" ] && break; sleep 0.1; done
sleep 0.5
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
c0=$(cpu); t0=$(date +%s.%N)
"$bin" copy "$w/m" --every 100ms >/dev/null 2>&1
t1=$(date +%s.%N); c1=$(cpu)
frames=$(/usr/bin/python3 -c "import json; print(json.load(open('$w/m/.vidfs/stats'))['copy']['frames'])")
/usr/bin/python3 -c "w = $t1 - $t0; print('workers $workers: %.1f s, %d frames, %.0f frames/s, vidfs CPU %.1f s' % (w, $frames, $frames / w, ($c1 - $c0) / $(getconf CLK_TCK)))"
kill -INT "$pid"; wait "$pid" || true
