#!/usr/bin/env bash
# Runs decode's benchmarks (vidfs's decoder and PyAV on the same clips, one pass after the other;
# the ffmpeg CLI floor) in one `go test -bench` run and writes their table into
# docs/benchmarks.md, between the <!-- decode:begin --> and <!-- decode:end --> markers.
# Usage: scripts/bench-decode.sh [COUNT]      COUNT runs of each (default 3); medians are written
#        scripts/bench-decode.sh --from FILE  write the section from a saved run's output instead
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --from ]; then
  raw=${2:?usage: scripts/bench-decode.sh --from FILE}
  count=$(grep -c '^BenchmarkVersusPyAV/gop16/stride1-' "$raw" || true)
  cmd="go test -run '^\$' -bench 'VersusPyAV|FFmpegFloor' -benchtime 1x -count $count ./decode/"
  when=$(date -u -r "$raw" +%Y-%m-%d)
else
  count=${1:-3}
  raw=$(mktemp)
  trap 'rm -f "$raw"' EXIT
  cmd="go test -run '^\$' -bench 'VersusPyAV|FFmpegFloor' -benchtime 1x -count $count ./decode/"
  echo "running: $cmd" >&2
  load0=$(cut -d' ' -f1 /proc/loadavg)
  scripts/with-ffmpeg go test -run '^$' -bench 'VersusPyAV|FFmpegFloor' -benchtime 1x -count "$count" ./decode/ | tee "$raw" >&2
  when=$(date -u +%Y-%m-%d)
  # The machine's load around the run: on a shared machine, other work slows both contenders
  # (the ratios, taken turn by turn, less so than the rates).
  load=" (load average $load0 at the start, $(cut -d' ' -f1 /proc/loadavg) at the end)"
fi

# a metric's values over the runs of one benchmark, sorted
vals() { # NAME UNIT
  awk -v n="$1" -v u="$2" '$1 ~ "^"n"-[0-9]+$" { for (i = 2; i < NF; i++) if ($(i+1) == u) print $i }' "$raw" | sort -g
}
# median of a metric over the runs of one benchmark
med() { # NAME UNIT
  vals "$1" "$2" | awk '{ v[NR] = $1 } END { if (NR == 0) print "n/a"; else if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2] + v[NR/2+1]) / 2 }'
}
# lowest and highest value of a metric, as "LOW-HIGH"
# "gop16/stride4" as "GOP 16, stride 4"
label() { echo "$1" | sed 's|gop\([0-9]*\)/stride\([0-9]*\)|GOP \1, stride \2|'; }
range() { # NAME UNIT
  vals "$1" "$2" | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.2f-%.2f", lo, hi }'
}
cpu=$(awk -F': ' '/^cpu:/ {print $2; exit}' "$raw")
table=$(
  echo "| clips: T=16, 224x224 crop, random starts | vidfs clips/s | PyAV clips/s | vidfs / PyAV, wall | vidfs / PyAV, CPU time (range over runs) |"
  echo "|---|---:|---:|---:|---:|"
  for c in gop16/stride1 gop16/stride4 gop250/stride1 gop250/stride4; do
    b="BenchmarkVersusPyAV/$c"
    label=$(label "$c")
    printf "| Megamind H.264 720x528, %s | %.1f | %.1f | **%.2fx** | **%.2fx** (%s) |\n" "$label" \
      "$(med "$b" vidfs-clips/s)" "$(med "$b" pyav-clips/s)" "$(med "$b" x-wall)" "$(med "$b" x-cpu)" "$(range "$b" x-cpu)"
  done
  echo
  below=""; runs=0; low=0
  for c in gop16/stride1 gop16/stride4 gop250/stride1 gop250/stride4; do
    b="BenchmarkVersusPyAV/$c"
    label=$(label "$c")
    [ "$(echo "$(med "$b" x-cpu) >= 1.5" | bc -l)" = 1 ] || below="$below${below:+, }$label"
    runs=$((runs + $(vals "$b" x-cpu | wc -l)))
    low=$((low + $(vals "$b" x-cpu | awk '$1 < 1.5' | wc -l)))
  done
  if [ -z "$below" ]; then
    echo "Target, at least 1.5x PyAV per core (median CPU-time ratio): **met** for all four kinds of clip;"
  else
    echo "Target, at least 1.5x PyAV per core (median CPU-time ratio): **not met** for $below;"
  fi
  echo "$low of the $runs runs were below 1.5x."
  echo
  echo "Frames decoded per clip: vidfs's count (frames out of its decoder), the least an exact decoder"
  echo "must decode (every reference frame from the keyframe to the clip's last frame, plus the clip's"
  echo "own frames; \`bench/decode_floor.py\`), and every frame from the keyframe to the clip's last"
  echo "frame, which is what decoding without skipping costs (PyAV's way):"
  echo
  echo "| clips | vidfs | exact floor | keyframe to last frame |"
  echo "|---|---:|---:|---:|"
  for c in gop16/stride1 gop16/stride4 gop250/stride1 gop250/stride4; do
    label=$(label "$c")
    b="BenchmarkVersusPyAV/$c"
    printf "| %s | %.1f | %.1f | %.1f |\n" "$label" "$(med "$b" vidfs-frames/clip)" \
      "$(med "$b" floor-frames/clip)" "$(med "$b" all-frames/clip)"
  done
  echo
  echo "Clips at a target rate, \`--fps 15\` (issue 20): 16 frames 1/15 s apart from random starts, from"
  echo "Megamind's 270 frames retimed to 60, 30 and 24 frames/s (H.264 720x528, GOP 2 s, B-frames). PyAV"
  echo "(\`bench/pyav_fps_clips.py\`) seeks, decodes and keeps, for each instant, the last frame whose"
  echo "timestamp is at or before it, as a Dataset resampling by time does; every clip's frames were"
  echo "checked to be the ones vidfs serves. Frames decoded per frame served: vidfs's, the exact floor"
  echo "(reference frames from the keyframe to the clip's last frame, plus the frames shown), and every"
  echo "frame from the keyframe to the clip's last (decoding without skipping, PyAV's way)."
  echo
  echo "| --fps 15 from | vidfs clips/s | PyAV clips/s | vidfs / PyAV, wall | vidfs / PyAV, CPU time (range) | decoded per served: vidfs | exact floor | keyframe to last frame |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|"
  for src in 60 30 24; do
    b="BenchmarkFPSVersusPyAV/${src}fps"
    printf "| %s fps | %.1f | %.1f | **%.2fx** | **%.2fx** (%s) | %.2f | %.2f | %.2f |\n" "$src" \
      "$(med "$b" vidfs-clips/s)" "$(med "$b" pyav-clips/s)" "$(med "$b" x-wall)" "$(med "$b" x-cpu)" "$(range "$b" x-cpu)" \
      "$(med "$b" vidfs-frames/served)" "$(med "$b" floor-frames/served)" "$(med "$b" all-frames/served)"
  done
  echo
  echo "vidfs decodes below the floor where a clip carries on from the one before without a seek (the"
  echo "floor starts every clip at its keyframe)."
  echo
  echo "Floor, \`ffmpeg -threads 1 -i FILE -f null -\` (Debian's FFmpeg 5.1) decoding the whole file:" \
    "$(printf '%.0f' "$(med BenchmarkFFmpegFloor/gop16 frames/s)") frames/s (GOP 16)," \
    "$(printf '%.0f' "$(med BenchmarkFFmpegFloor/gop250 frames/s)") frames/s (GOP 250)."
)
section=$(cat <<MD
<!-- decode:begin -->
## Decoding clips (issue 2)

Measured $when on ${cpu:-this machine}, $(nproc) cores${load:-}, by \`make bench-decode\`
(\`scripts/bench-decode.sh\`: \`$cmd\`, median of $count runs). In each run vidfs and PyAV
decode the same clips one right after the other, and the ratios are taken run by run.
Each clip is 16 frames at stride 1 or 4 from a random start (the same 100 starts for both),
cropped to 224x224, RGB24. vidfs: \`decode.Pool\`, one clip at a time, one decoder thread.
PyAV: Debian's python3-av 10 (FFmpeg 5.1), one thread, \`bench/pyav_clips.py\`: open, seek,
decode, \`to_ndarray(width=224, height=224)\` per clip, the way a typical Dataset does.

$table

The target is 1.5x PyAV per core. "CPU time" compares clips per CPU second of each whole
process (vidfs's Go runtime included; PyAV's Python included), "wall" clips per second.

Where the time goes (perf, GOP 16 stride 4): H.264 decoding is about 88 % of vidfs's time and
scaling about 5 %. vidfs decodes fewer frames than PyAV because it skips the non-reference
frames that the clip does not hold, and stops as soon as it has the clip: at the end of a clip
in a short GOP it drains the decoder rather than decoding on to push out the frames held back
for reordering. It also keeps the file and decoder open between clips, and converts with less
work (crop first, scale in YUV 4:2:0, then an unscaled SIMD conversion to RGB). The table above
shows vidfs at the floor: exactness forbids skipping reference frames, so what is left is the
speed of FFmpeg's H.264 decoder itself. Stride 4 is where the margin is thinnest, because most of
its frames are reference frames that both decoders must decode. The FFmpeg build is
position-dependent (\`--disable-pic\`), which lets FFmpeg's x86-64 CABAC assembly use its
faster form (2-3 % on these clips).
<!-- decode:end -->
MD
)
doc=docs/benchmarks.md
mkdir -p docs
[ -f "$doc" ] || printf '# Benchmarks\n\nEvery figure here was printed by the command named beside it, on the machine named.\n\n<!-- decode:begin -->\n<!-- decode:end -->\n' > "$doc"
SECTION="$section" python3 - "$doc" <<'PY'
import os, re, sys
p = sys.argv[1]
s = open(p).read()
new = os.environ["SECTION"]
s2, n = re.subn(r"<!-- decode:begin -->.*?<!-- decode:end -->", lambda m: new, s, flags=re.S)
if n == 0:
    s2 = s.rstrip("\n") + "\n\n" + new + "\n"
open(p, "w").write(s2)
PY
echo "wrote the decode section of $doc" >&2
