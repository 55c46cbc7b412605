#!/usr/bin/env bash
# Provides FFmpeg 7.1 libraries for go-astiav and prints the pkg-config directory to use.
#
# If pkg-config already finds FFmpeg 7.x (libavcodec 61) it is used as it is. Otherwise FFmpeg 7.1
# is built from Debian 13's source package `ffmpeg` (and `nv-codec-headers` 12.1 for NVDEC), fetched
# with `apt-get source` through a private apt state directory: the machine's apt configuration is
# never edited, and the mirror is read from the machine's own Debian sources.
#
# The build is static (bin/vidfs then needs only libc, libm, libz and libdav1d at run time) and is
# cached under ${XDG_CACHE_HOME:-~/.cache}/vidfs/, keyed by version and configure options, so a
# second run returns at once.
#
# Usage: scripts/ffmpeg.sh            # build or find; last line of stdout is the pkg-config dir
#        VIDFS_FFMPEG_SYSTEM=0 ...    # ignore a system FFmpeg 7 and use the cached build
#        scripts/ffmpeg.sh --options  # print the configure options, one a line (scripts/dist.sh
#                                     # builds the release's FFmpeg with the same ones)
set -euo pipefail

log() { echo "ffmpeg.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }

# Build options. Changing them changes the cache key.
# Position-dependent code: Go links cgo programs as non-PIE executables by default, and on x86-64
# FFmpeg's PIC build takes a slower path in its CABAC assembly (H.264/HEVC entropy decoding);
# clips decoded 2-3 % faster without it (BenchmarkDecodeClip, gop16/stride4). So
# `go build -buildmode=pie` cannot link against this build.
BRANCH=7.1
CONFIGURE_OPTS=(
  --disable-shared --enable-static --disable-pic --extra-cflags=-fno-pie --extra-ldflags=-no-pie
  --disable-programs --disable-doc --disable-debug
  --disable-encoders --disable-muxers --disable-devices --disable-network
  --disable-protocols --enable-protocol=file,pipe
  --disable-filters --enable-filter=buffer,buffersink,scale,crop,pad,transpose,hflip,vflip,format,null,hwdownload
  --disable-autodetect --enable-pthreads --enable-zlib --enable-libdav1d
  --enable-ffnvcodec --enable-cuda --enable-nvdec --enable-cuvid
)
if [ "${1:-}" = --options ]; then
  printf '%s\n' "${CONFIGURE_OPTS[@]}"
  exit 0
fi

# 1. A system FFmpeg 7.x is good enough.
if [ "${VIDFS_FFMPEG_SYSTEM:-1}" = 1 ] && pkg-config --exists 'libavcodec >= 61' 'libavcodec < 62' 2>/dev/null; then
  log "using system FFmpeg $(pkg-config --modversion libavcodec) (libavcodec)"
  pkg-config --variable=pcfiledir libavcodec
  exit 0
fi

SCRIPT_VERSION=1
key=$(printf '%s\n' "$BRANCH" "$SCRIPT_VERSION" "${CONFIGURE_OPTS[@]}" | sha256sum | cut -c1-12)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/vidfs
prefix=$cache/ffmpeg-$BRANCH-$key
if [ -f "$prefix/.complete" ]; then
  log "using cached FFmpeg $(cat "$prefix/.complete") in $prefix"
  echo "$prefix/lib/pkgconfig"
  exit 0
fi

# 2. Build it. Tools needed: apt-get source needs dpkg-dev; the build needs gcc, make, nasm,
#    pkg-config, zlib and dav1d headers.
missing=()
for t in dpkg-source gcc make nasm pkg-config; do command -v "$t" >/dev/null || missing+=("$t"); done
pkg-config --exists dav1d || missing+=(libdav1d-dev)
[ -f /usr/include/zlib.h ] || missing+=(zlib1g-dev)
if [ ${#missing[@]} -gt 0 ]; then
  die "missing build tools (${missing[*]}); as root run: apt-get install -y build-essential dpkg-dev nasm pkg-config libdav1d-dev zlib1g-dev"
fi

work=$cache/build-$key
rm -rf "$work"
"$(dirname "$0")/debsrc.sh" fetch "$work/src" trixie ffmpeg nv-codec-headers:orig \
  || die "could not fetch Debian 13's ffmpeg and nv-codec-headers sources"

ffsrc=$(find "$work/src" -maxdepth 1 -type d -name 'ffmpeg-7.1*' | head -n1)
nvsrc=$(find "$work/src" -maxdepth 1 -type d -name 'nv-codec-headers-*' | head -n1)
[ -n "$ffsrc" ] || die "no ffmpeg-7.1 source tree in $work/src (did trixie move to another FFmpeg?)"
[ -n "$nvsrc" ] || die "no nv-codec-headers source tree in $work/src"
version=$(basename "$ffsrc" | sed 's/^ffmpeg-//')

stage=$prefix.tmp
rm -rf "$stage"
make -C "$nvsrc" PREFIX="$stage" install >&2
export PKG_CONFIG_PATH="$stage/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
jobs=$(nproc)
log "configuring FFmpeg $version ($jobs jobs); this takes about 5 minutes on 2 cores"
start=$(date +%s)
(cd "$ffsrc" && ./configure --prefix="$stage" --pkg-config-flags=--static "${CONFIGURE_OPTS[@]}" >&2) \
  || die "FFmpeg configure failed; see $ffsrc/ffbuild/config.log"
(cd "$ffsrc" && make -j"$jobs" >&2 && make install >&2) || die "FFmpeg build failed in $ffsrc"
echo "$version" > "$stage/.complete"
rm -rf "$prefix" && mv "$stage" "$prefix"
# pkg-config files name the staging prefix; point them at the final one.
sed -i "s|$stage|$prefix|g" "$prefix"/lib/pkgconfig/*.pc
rm -rf "$work"
log "built FFmpeg $version in $(( $(date +%s) - start )) s into $prefix"
echo "$prefix/lib/pkgconfig"
