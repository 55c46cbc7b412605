#!/usr/bin/env bash
# Generates the small test videos in testdata/videos/ with Debian's ffmpeg CLI (5.1).
#
# Every frame shows its own index as a 4x4 grid of large black/white cells that survives
# compression and resizing: cell c (row-major, c = col + 4*row) is white when bit c of the
# 16-bit code is set; bits 0-11 hold the frame index and bits 12-15 hold (index*7+3) mod 16 as a
# check; read it back from luma. internal/testvideo reads it back. The outputs are committed (a few hundred KB);
# run this script again only when the set changes:   testdata/gen.sh [OUTDIR]
set -euo pipefail
out=${1:-$(dirname "$0")/videos}
mkdir -p "$out"
command -v ffmpeg >/dev/null || { echo "gen.sh: needs Debian's ffmpeg CLI (apt-get install ffmpeg)" >&2; exit 1; }

# The index pattern at display size WxH, as a geq filter. B is the cell under (X,Y).
pattern() { # W H
  local cell='st(0,floor(X*4/W)+4*floor(Y*4/H))'
  local bit='if(lt(ld(0),12),mod(floor(N/pow(2,ld(0))),2),mod(floor(mod(N*7+3,16)/pow(2,ld(0)-12)),2))'
  # Chroma moves (motion for the encoders to work on) and leaves luma, which carries the code, alone.
  echo "geq=lum='${cell};16+219*${bit}':cb='128+40*sin(X/9+N/4)':cr='128+40*cos(Y/7-N/5)'"
}
src() { # W H FRAMES: a W x H source at 25 frames/s (geq paints all of it), and the frame count
  echo "-f lavfi -i nullsrc=s=$1x$2:r=25 -frames:v $3"   # (color= would round odd sizes)
}
ff() { ffmpeg -hide_banner -loglevel error -y -threads 1 "$@"; }
# Fixed B-frame pattern, so frames are always reordered.
x264() { echo "-c:v libx264 -preset veryfast -threads 1 -pix_fmt yuv420p -bf 3 -x264-params b-adapt=0 -bitexact"; }

# H.264 in MP4 with B-frames (which also gives an edit list), GOP 16 and GOP 250.
ff $(src 320 240 100) -vf "$(pattern)" $(x264) -g 16 -keyint_min 16 -sc_threshold 0 "$out/h264_gop16.mp4"
ff $(src 320 240 300) -vf "$(pattern)" $(x264) -g 250 -keyint_min 250 -sc_threshold 0 "$out/h264_gop250.mp4"
# HEVC in Matroska, VP9 in WebM, AV1 in MP4, MPEG-4 part 2 in AVI.
ff $(src 320 240 60) -vf "$(pattern)" -c:v libx265 -preset ultrafast -pix_fmt yuv420p -g 24 \
   -x265-params log-level=error:pools=none:frame-threads=1:bframes=3 "$out/hevc.mkv"
ff $(src 320 240 60) -vf "$(pattern)" -c:v libvpx-vp9 -deadline realtime -cpu-used 8 -g 24 -b:v 400k "$out/vp9.webm"
ff $(src 320 240 40) -vf "$(pattern)" -c:v libaom-av1 -cpu-used 8 -row-mt 0 -g 20 -b:v 300k "$out/av1.mp4"
ff $(src 320 240 60) -vf "$(pattern)" -c:v mpeg4 -q:v 3 -g 12 -bf 2 "$out/mpeg4.avi"
# Older and intra-only codecs datasets still hold.
ff $(src 320 240 30) -vf "$(pattern)" -c:v mjpeg -q:v 3 -pix_fmt yuvj420p "$out/mjpeg.avi"
ff $(src 320 240 30) -vf "$(pattern)" -c:v libtheora -q:v 7 -g 10 "$out/theora.ogv"
ff $(src 320 240 30) -vf "$(pattern)" -c:v flv -q:v 3 -g 10 "$out/flv1.flv"
ff $(src 320 240 40) -vf "$(pattern)" -c:v libvpx -deadline realtime -cpu-used 8 -g 10 -b:v 400k -auto-alt-ref 0 "$out/vp8.webm"
# Odd width and height (VP9 allows them in 4:2:0).
ff $(src 321 241 40) -vf "$(pattern)" -c:v libvpx-vp9 -deadline realtime -cpu-used 8 -g 16 -b:v 400k "$out/odd_321x241.webm"
# Rotation metadata: the pattern is drawn upright at 240x320, stored transposed as 320x240, and
# tagged (display matrix, 90 degrees counter-clockwise) to be shown turned back upright.
# (ffmpeg 5.1 writes the tag only when remuxing.)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ff $(src 240 320 40) -vf "$(pattern),transpose=clock" $(x264) -g 16 "$tmp/rotate.mp4"
ff -i "$tmp/rotate.mp4" -c copy -metadata:s:v:0 rotate=90 "$out/rotated.mp4"
# Variable frame rate: frames 40 ms apart, with every third one 15 ms late.
ff $(src 320 240 60) -vf "$(pattern),settb=1/1000,setpts='N*40+if(eq(mod(N\,3)\,1)\,15\,0)'" \
   -fps_mode passthrough -enc_time_base:v 1/1000 $(x264) -g 16 "$out/vfr.mkv"
# Non-zero start time: MPEG-TS, 10 s offset (plus the muxer's own delay).
ff $(src 320 240 60) -vf "$(pattern)" $(x264) -g 16 -output_ts_offset 10 "$out/start10.ts"
# Shorter than a 16-frame clip.
ff $(src 320 240 8) -vf "$(pattern)" $(x264) -g 16 "$out/short8.mp4"

# Frame rates, for clips at a target rate (--fps): constant 24, 30, 60 and 30000/1001 frames/s
# (25 is h264_gop16.mp4), 3 s each, a group of pictures a second; the index pattern at 160x120.
rate() { # RATE FRAMES: a 160x120 source at RATE frames/s
  echo "-f lavfi -i nullsrc=s=160x120:r=$1 -frames:v $2"
}
ff $(rate 24 72) -vf "$(pattern)" $(x264) -g 24 -keyint_min 24 -sc_threshold 0 "$out/cfr24.mp4"
ff $(rate 30 90) -vf "$(pattern)" $(x264) -g 30 -keyint_min 30 -sc_threshold 0 "$out/cfr30.mp4"
ff $(rate 60 180) -vf "$(pattern)" $(x264) -g 60 -keyint_min 60 -sc_threshold 0 "$out/cfr60.mp4"
ff $(rate 30000/1001 90) -vf "$(pattern)" $(x264) -g 30 -keyint_min 30 -sc_threshold 0 "$out/ntsc.mp4"
# Phone-like variable frame rate in MP4: 30 frames/s for a second, then 15, then 30 again, with a
# few milliseconds of jitter (timestamps in ms; -fps_mode vfr keeps them as they are).
ff $(rate 30 90) -vf "$(pattern),settb=1/1000,setpts='N*33+if(gte(N\,30)\,min(N-30\,30)*33\,0)+if(eq(mod(N\,4)\,1)\,9\,0)'" \
   -fps_mode vfr -enc_time_base:v 1/1000 $(x264) -g 30 "$out/vfr_phone.mp4"
# An AVI without presentation timestamps (MPEG-4 part 2 with B-frames) at 24 frames/s: timed by
# its average frame rate.
ff $(rate 24 48) -vf "$(pattern)" -c:v mpeg4 -q:v 3 -g 12 -bf 2 "$out/mpeg4_24.avi"
# Clocks that tick once a frame, whose times are exact: an AVI whose packets all carry timestamps
# (MPEG-4 part 2 without B-frames: timed by them, time base 1/25), and an MP4 whose track's
# timescale is its rate (30). At 8 and 20 frames/s some instants fall halfway between two frames
# (0.5 s at 25 frames/s is frame 12.5), where the earlier of the two is the one shown.
ff $(rate 25 16) -vf "$(pattern)" -c:v mpeg4 -q:v 3 -g 12 -bf 0 "$out/tick25.avi"
ff $(rate 30 30) -vf "$(pattern)" $(x264) -g 30 -keyint_min 30 -sc_threshold 0 -video_track_timescale 30 "$out/tick30.mp4"

# Containers and streams whose decoder numbers frames otherwise than their packets suggest (see
# "What frame k means" in docs/design.md). Moving content (testsrc2) rather than the index
# pattern: these are checked frame by frame against the ffmpeg CLI's own decode.
moving() { # W H FRAMES
  echo "-f lavfi -i testsrc2=s=$1x$2:r=25 -frames:v $3"
}
patch() { /usr/bin/python3 "$(dirname "$0")/patch.py" "$@"; }
# 1. MPEG-4 part 2 with DivX/Xvid packed B-frames in AVI, as HMDB51 and UCF101 hold it: a packet
#    holds a P-frame and the B-frame after it, and a placeholder of a few bytes follows. Written
#    without the empty chunks FFmpeg's muxer leaves for the encoder's delay, as other muxers do.
ff $(moving 176 144 48) -c:v libxvid -bf 2 -g 24 -q:v 5 "$tmp/packed.avi"
patch avi-compact "$tmp/packed.avi" "$out/xvid_packed.avi"
# 2. H.264 High 4:4:4 Predictive in MP4 with periodic intra refresh: its keyframes (recovery
#    points, listed as sync samples) decode clean only once a refresh has swept the picture.
ff $(moving 176 144 75) -c:v libx264 -preset veryfast -pix_fmt yuv444p \
   -x264-params keyint=25:intra-refresh=1:bframes=0:ref=3 "$out/h264_refresh444.mp4"
# 3. MPEG-2 with B-frames in an MPEG program stream cut at an open group of pictures, as a DVD
#    chapter or a camera's file may start: its first two B-frames refer to a picture the file
#    does not hold, and only some frames carry timestamps.
ff $(moving 176 144 48) -c:v mpeg2video -bf 2 -g 12 -q:v 10 -f vob "$tmp/long.mpg"
ff -ss 0.5 -i "$tmp/long.mpg" -c copy -f vob "$out/mpeg2_cut.mpg" 2>/dev/null
# 4. A display matrix with a reflection: shown transposed (turned 90 degrees and mirrored).
ff $(moving 176 144 30) -c:v libx264 -preset veryfast -pix_fmt yuv420p -bitexact "$tmp/plain.mp4"
patch mp4-matrix "$tmp/plain.mp4" "$out/mirrored.mp4" 0 1 1 0
# 5. H.264 with B-frames in AVI (decode timestamps only), whose headers declare one frame more
#    than it holds.
ff $(moving 176 144 40) $(x264) -g 16 "$tmp/h264.avi"
patch avi-declare "$tmp/h264.avi" "$out/h264_bframes.avi" 1
# 6. H.264 with B-frames in MP4 whose SPS does not say how many frames the decoder holds back for
#    reordering (no bitstream_restriction in its VUI), as many phones and cameras write it: the
#    decoder learns the delay from the frames themselves.
ff $(moving 176 144 48) $(x264) -g 24 "$tmp/reorder.mp4"
patch mp4-no-reorder "$tmp/reorder.mp4" "$out/h264_noreorder.mp4"
# 7. H.264 with B-frames in MP4 cut without re-encoding (ffmpeg -ss with -c copy, as datasets cut
#    from longer videos often are): an edit list starts the video after a keyframe, whose packet
#    and those up to the cut are still in the file, marked to be discarded. The frames shown are
#    predicted from them.
ff $(moving 176 144 75) $(x264) -g 25 -keyint_min 25 -sc_threshold 0 "$tmp/long.mp4"
ff -ss 0.5 -i "$tmp/long.mp4" -c copy "$out/h264_editstart.mp4"
# 8. The same, trimmed at its end by an edit list that stops before its last P-frame (as editors
#    that trim a clip without re-encoding write it): the B-frames shown before it refer to it.
ff $(moving 176 144 50) $(x264) -g 25 -keyint_min 25 -sc_threshold 0 "$tmp/trim.mp4"
patch mp4-edit-end "$tmp/trim.mp4" "$out/h264_editend.mp4" 1

# A codec this build cannot know: the MPEG-4 AVI with its FourCC (FMP4) replaced by a made-up one.
/usr/bin/python3 - "$out/mpeg4.avi" "$out/unknown_codec.avi" <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
assert b"FMP4" in data
open(sys.argv[2], "wb").write(data.replace(b"FMP4", b"XVQZ"))
PY

# Damaged files. truncated: the first 60 % of a 100-frame MP4 whose index is at the front.
ff $(src 320 240 100) -vf "$(pattern)" $(x264) -g 20 -keyint_min 20 -sc_threshold 0 -movflags +faststart "$tmp/whole.mp4"
size=$(stat -c %s "$tmp/whole.mp4")
head -c $((size * 6 / 10)) "$tmp/whole.mp4" > "$out/truncated.mp4"
# corrupt: the same file with 4 KiB of pseudo-random bytes written over the middle of its media
# data; the byte range is recorded beside it for the tests.
off=$((size / 2))
cp "$tmp/whole.mp4" "$out/corrupt.mp4"
/usr/bin/python3 - "$out/corrupt.mp4" "$off" 4096 <<'PY'
import random, sys
path, off, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rnd = random.Random(20261122)
with open(path, "r+b") as f:
    f.seek(off)
    f.write(bytes(rnd.randrange(256) for _ in range(n)))
PY
echo "$off 4096" > "$out/corrupt.mp4.damage"
# random: 64 KiB of pseudo-random bytes named like a video; empty: nothing at all.
/usr/bin/python3 -c 'import random,sys; r=random.Random(7); sys.stdout.buffer.write(bytes(r.randrange(256) for _ in range(65536)))' > "$out/random.mp4"
: > "$out/empty.mp4"
ls -l "$out" >&2
