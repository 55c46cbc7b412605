#!/bin/bash
# The Go memory limit's cost at scale (issue 40): bench/scale.py's loader (DataLoader, 2 workers,
# 80 batches of 8 after 5) on a fresh mount of N videos (bench/scale.py's sources and probe
# cache; run it for N first), ROUNDS times each with the mount's own limit and with GOMEMLIMIT=off
# (no limit: GOGC alone), taking turns. Prints, per run: clips/s, vidfs's CPU per clip, and the
# collector's cycles and CPU seconds during the loader, with the live heap and the limit after.
# With BASE=/path/to/an/earlier/vidfs, each round runs that binary with its own limit too.
# usage: [BASE=...] bench/memlimit.sh [N] [ROUNDS]   (defaults 240000 3)
set -euo pipefail
N=${1:-240000}; ROUNDS=${2:-3}
C=~/.cache/vidfs/bench/scale; M=$(mktemp -d)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
[ -d "$C/probe-$N" ] || { echo "no probe cache for $N videos: run bench/scale.py --sizes $N first" >&2; exit 2; }
gcfig() { /usr/bin/python3 -c "import json,sys; m=json.load(open(sys.argv[1]))['memory']; print(m['gc_cycles'], m['gc_cpu_seconds'], m['go_heap_live_bytes']>>20, min(m['go_memory_limit_bytes']>>20, 10**9))" "$M/.vidfs/stats"; }
one() {
  local bin=$ROOT/bin/vidfs label=${1:-default limit}
  if [ "${1:-}" = base ]; then bin=$BASE; label="$BASE"; shift; fi
  env "$@" "$bin" mount "$C/src-$N" "$M" --frames 16 --stride 2 --size 224x224 --cache-mem 1GiB --probe-cache "$C/probe-$N" 2>/dev/null &
  local p=$!
  until [ -e "$M/.vidfs/stats" ]; do sleep 0.1; done
  read -r c0 s0 _ _ <<<"$(gcfig)"
  local r; r=$(cd "$ROOT" && /usr/bin/python3 bench/scale.py loader "$M" "$p" 80 5 3 | tail -1)
  read -r c1 s1 live limit <<<"$(gcfig)"
  kill -INT "$p"; wait "$p" || true
  /usr/bin/python3 -c "import json,sys; a=sys.argv; r=json.loads(a[1]); print('%-18s %5.1f clips/s  vidfs %.4f CPU s/clip  %4d collections, %.2f s of GC CPU  (live heap %s MiB, limit %s MiB)' % (a[2], r['clips_per_s'], r['vidfs_cpu_s_per_clip'], int(a[4]) - int(a[3]), float(a[6]) - float(a[5]), a[7], a[8]))" \
    "$r" "$label" "$c0" "$c1" "$s0" "$s1" "$live" "$limit"
}
for _ in $(seq "$ROUNDS"); do
  if [ -n "${BASE:-}" ]; then one base; fi
  one
  one GOMEMLIMIT=off
done
rmdir "$M"
