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
set -euo pipefail

log() { echo "ffmpeg.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }

# 1. A system FFmpeg 7.x is good enough.
if [ "${VIDFS_FFMPEG_SYSTEM:-1}" = 1 ] && pkg-config --exists 'libavcodec >= 61' 'libavcodec < 62' 2>/dev/null; then
  log "using system FFmpeg $(pkg-config --modversion libavcodec) (libavcodec)"
  pkg-config --variable=pcfiledir libavcodec
  exit 0
fi

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

# The Debian mirror this machine already uses (deb822 .sources or one-line sources.list).
mirror=$(
  { cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '/^URIs:/{for(i=2;i<=NF;i++)print $i}'
    cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | awk '$1=="deb"||$1=="deb-src"{for(i=2;i<=NF;i++) if($i ~ /:\/\//){print $i; break}}'
  } | grep -E '/debian/?$' | head -n1 || true)
[ -n "$mirror" ] || die "found no Debian mirror in /etc/apt/sources.list{,.d/}; cannot fetch trixie sources"
log "fetching Debian 13 sources from $mirror"

work=$cache/build-$key
rm -rf "$work"
mkdir -p "$work"/apt/{lists/partial,cache/archives/partial,etc/sources.list.d,etc/preferences.d} "$work/src"
echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror trixie main" > "$work/apt/etc/sources.list"
apt_opts=(
  -o "Dir::Etc::SourceList=$work/apt/etc/sources.list"
  -o "Dir::Etc::SourceParts=$work/apt/etc/sources.list.d"
  -o "Dir::Etc::Preferences=$work/apt/etc/preferences"
  -o "Dir::Etc::PreferencesParts=$work/apt/etc/preferences.d"
  -o "Dir::State::Lists=$work/apt/lists"
  -o "Dir::Cache=$work/apt/cache"
  -o "Debug::NoLocking=1"
  -o "APT::Sandbox::User=$(id -un)"
)
apt-get -q "${apt_opts[@]}" update >&2 || die "apt-get update for trixie sources failed"
(cd "$work/src" && apt-get -q "${apt_opts[@]}" source ffmpeg >&2) || die "apt-get source ffmpeg (trixie) failed"
# nv-codec-headers is headers and a Makefile: its upstream tarball is all that is needed (and the
# mirror has been seen to lack its Debian diff).
(cd "$work/src" && apt-get -q "${apt_opts[@]}" source --tar-only nv-codec-headers >&2 \
  && tar -xf nv-codec-headers_*.orig.tar.* >&2) || die "apt-get source nv-codec-headers (trixie) failed"

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
