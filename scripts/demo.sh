#!/usr/bin/env bash
# make demo: mounts the bundled sample videos (testdata/videos, arranged in class folders of
# links; nothing in testdata is written), writes a shuffled plan, reads every sample back through
# NumPy in that order, prints shapes, clips/s, hit rate and seconds waited, then unmounts.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d /tmp/vidfs-demo.XXXXXX)
src=$work/videos mnt=$work/mnt
mkdir -p "$mnt"
link() { mkdir -p "$src/$1"; for f in "${@:2}"; do ln -s "$PWD/testdata/videos/$f" "$src/$1/$f"; done; }
link modern h264_gop16.mp4 h264_gop250.mp4 hevc.mkv vp9.webm av1.mp4 vfr.mkv rotated.mp4 odd_321x241.webm
link legacy mpeg4.avi mjpeg.avi theora.ogv flv1.flv vp8.webm start10.ts short8.mp4
link damaged corrupt.mp4 truncated.mp4 empty.mp4 random.mp4

echo "== vidfs mount $src $mnt --size 112x112 --frames 8 --stride 2 --cache-mem 256MiB"
bin/vidfs mount "$src" "$mnt" --size 112x112 --frames 8 --stride 2 --cache-mem 256MiB --probe-cache "$work/probe" &
pid=$!
cleanup() { kill -INT "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
for _ in $(seq 100); do [ -e "$mnt/.vidfs/stats" ] && break; sleep 0.2; done
[ -e "$mnt/.vidfs/stats" ] || { echo "demo: the mount did not come up" >&2; exit 1; }

echo "== reading"
/usr/bin/python3 scripts/demo.py "$mnt"
echo "== unmounting"
kill -INT "$pid"
wait "$pid"
trap 'rm -rf "$work"' EXIT
echo "== done"
