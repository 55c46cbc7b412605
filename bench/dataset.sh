#!/usr/bin/env bash
# Builds make bench's dataset in OUTDIR (once; a finished one is reused): 200 short H.264 videos
# cut from the real footage in Debian's opencv-doc, in four class folders:
#   megamind-360p/, megamind-480p/: 17 cuts of Megamind.avi (24 fps), 3 s (72 frames) each
#   vtest-360p/, vtest-480p/:       33 cuts of vtest.avi (10 fps), 6 s (60 frames) each
# each cut plain and mirrored, GOP 2 s, x264 veryfast, yuv420p.   Usage: bench/dataset.sh OUTDIR
set -euo pipefail
out=${1:?usage: bench/dataset.sh OUTDIR}
[ -f "$out/.complete" ] && { echo "dataset: using $out" >&2; exit 0; }
data=/usr/share/doc/opencv-doc/examples/data
for f in Megamind.avi vtest.avi; do
  [ -f "$data/$f" ] || { echo "dataset: $data/$f missing: apt-get install opencv-doc" >&2; exit 1; }
done
rm -rf "$out" && mkdir -p "$out"
jobs=$(mktemp)
trap 'rm -f "$jobs"' EXIT
# One line per video: source, start (s), frames, gop, height, mirror, output.
for h in 360 480; do
  for k in $(seq 0 16); do
    for m in plain mirror; do
      echo "$data/Megamind.avi $(awk "BEGIN { print $k * 0.5 }") 72 48 $h $m $out/megamind-${h}p/cut$(printf %02d "$k")-$m.mp4"
    done
  done
  for k in $(seq 0 32); do
    for m in plain mirror; do
      echo "$data/vtest.avi $(awk "BEGIN { print $k * 2.2 }") 60 20 $h $m $out/vtest-${h}p/cut$(printf %02d "$k")-$m.mp4"
    done
  done
done > "$jobs"
mkdir -p "$out"/{megamind,vtest}-{360,480}p
echo "dataset: encoding $(wc -l < "$jobs") videos into $out" >&2
encode() {
  local src=$1 start=$2 frames=$3 gop=$4 h=$5 m=$6 dst=$7 vf="scale=-2:$5"
  [ "$m" = mirror ] && vf="$vf,hflip"
  ffmpeg -nostdin -hide_banner -loglevel error -y -ss "$start" -i "$src" -frames:v "$frames" -an -vf "$vf" \
    -c:v libx264 -preset veryfast -crf 23 -g "$gop" -keyint_min "$gop" -sc_threshold 0 -pix_fmt yuv420p "$dst"
}
export -f encode
xargs -P "$(nproc)" -L 1 bash -c 'encode "$@"' _ < "$jobs"
touch "$out/.complete"
echo "dataset: $(find "$out" -name '*.mp4' | wc -l) videos, $(du -sh "$out" | cut -f1)" >&2
