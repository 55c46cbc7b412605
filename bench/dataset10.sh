#!/usr/bin/env bash
# Builds the dataset of bench/random_clips.py in OUTDIR (once; a finished one is reused): H.264 videos of
# 10 s or more cut from the real footage in Debian's opencv-doc, in two class folders, at HEIGHT
# (default 480; 1080 upscales the footage, which is 528 and 576 lines high):
#   megamind/: Megamind.avi (24 fps, 11.3 s) whole (270 frames) and from 0.625 s (255 frames)
#   vtest/:    vtest.avi (10 fps, 79.5 s) cut at 0, 21, 42 and 63 s, 16 s (160 frames) each,
#              at its own 10 fps (not resampled)
# each plain, mirrored, and cropped to 80 % from the left and from the right (crop-l, crop-r):
# 24 videos at 480p. At 1080p, 8 of them: Megamind whole in the four ways, vtest at 0 and 42 s
# plain and mirrored. x264 veryfast, CRF 23, GOP 48 (closed, no scene cuts), 3 B-frames, yuv420p.
#   Usage: bench/dataset10.sh OUTDIR [HEIGHT]
set -euo pipefail
out=${1:?usage: bench/dataset10.sh OUTDIR [HEIGHT]}
h=${2:-480}
[ -f "$out/.complete" ] && { echo "dataset10: using $out" >&2; exit 0; }
data=/usr/share/doc/opencv-doc/examples/data
for f in Megamind.avi vtest.avi; do
  [ -f "$data/$f" ] || { echo "dataset10: $data/$f missing: apt-get install opencv-doc" >&2; exit 1; }
done
rm -rf "$out" && mkdir -p "$out"/{megamind,vtest}
jobs=$(mktemp)
trap 'rm -f "$jobs"' EXIT
# One line per video: source, start (s), frames, variant, output.
variants="plain mirror crop-l crop-r"
{
  if [ "$h" -ge 1080 ]; then
    for v in $variants; do echo "$data/Megamind.avi 0 270 $v $out/megamind/s000-$v.mp4"; done
    for s in 0 42; do
      for v in plain mirror; do echo "$data/vtest.avi $s 160 $v $out/vtest/s$(printf %03d "$s")-$v.mp4"; done
    done
  else
    for v in $variants; do
      echo "$data/Megamind.avi 0 270 $v $out/megamind/s000-$v.mp4"
      echo "$data/Megamind.avi 0.625 255 $v $out/megamind/s006-$v.mp4"
    done
    for s in 0 21 42 63; do
      for v in $variants; do echo "$data/vtest.avi $s 160 $v $out/vtest/s$(printf %03d "$s")-$v.mp4"; done
    done
  fi
} > "$jobs"
echo "dataset10: encoding $(wc -l < "$jobs") videos of 10 s or more at ${h}p into $out" >&2
encode() {
  local src=$1 start=$2 frames=$3 variant=$4 dst=$5 h=$6 vf
  case $variant in
    plain) vf="scale=-2:$h" ;;
    mirror) vf="hflip,scale=-2:$h" ;;
    crop-l) vf="crop=iw*4/5:ih*4/5:0:ih/10,scale=-2:$h" ;;
    crop-r) vf="crop=iw*4/5:ih*4/5:iw/5:ih/10,scale=-2:$h" ;;
  esac
  ffmpeg -nostdin -hide_banner -loglevel error -y -ss "$start" -i "$src" -frames:v "$frames" -an -vf "$vf" \
    -c:v libx264 -preset veryfast -crf 23 -g 48 -keyint_min 48 -sc_threshold 0 -bf 3 -pix_fmt yuv420p "$dst"
}
export -f encode
sed "s/\$/ $h/" "$jobs" | xargs -P "$(nproc)" -L 1 bash -c 'encode "$@"' _
# Every video must be 10 s or more: the point of this dataset.
for f in "$out"/*/*.mp4; do
  d=$(ffprobe -v error -select_streams v:0 -show_entries format=duration -of csv=p=0 "$f")
  awk -v d="$d" 'BEGIN { exit !(d >= 10) }' || { echo "dataset10: $f is $d s, under 10 s" >&2; exit 1; }
done
touch "$out/.complete"
echo "dataset10: $(find "$out" -name '*.mp4' | wc -l) videos, $(du -sh "$out" | cut -f1)" >&2
