#!/usr/bin/env bash
# The part of make dist that runs inside the Debian 11 build userland (scripts/dist.sh copies it
# to /build and runs it there with chroot). Not meant to be run by hand.
#
#   dist-inside.sh deps KEY   build dav1d (meson, static), FFmpeg (static, scripts/ffmpeg.sh's
#                             options, from /build/options) and nv-codec-headers from the sources
#                             in /build/src into /opt/vidfs, with bullseye's static zlib beside
#                             them; write /opt/vidfs/.complete = KEY when done
#   dist-inside.sh go         build /build/vidfs/cmd/vidfs against them into /build/out, with the
#                             Go modules' notices (go-licenses) in /build/out/go-notices.txt
set -euo pipefail
export LC_ALL=C
prefix=/opt/vidfs
log() { echo "dist-inside.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }
jobs=${JOBS:-$(nproc)}

deps() {
  local key=$1 src=/build/src
  rm -rf "$prefix" && mkdir -p "$prefix/lib" "$prefix/licenses"
  local ffsrc dav1dsrc nvsrc
  ffsrc=$(find "$src" -maxdepth 1 -type d -name 'ffmpeg-7.1*' | head -n1)
  dav1dsrc=$(find "$src" -maxdepth 1 -type d -name 'dav1d-*' | head -n1)
  nvsrc=$(find "$src" -maxdepth 1 -type d -name 'nv-codec-headers-*' | head -n1)
  [ -n "$ffsrc" ] && [ -n "$dav1dsrc" ] && [ -n "$nvsrc" ] || die "sources missing in $src"

  log "dav1d $(basename "$dav1dsrc"): meson, static"
  (cd "$dav1dsrc" && rm -rf build && meson setup build --prefix="$prefix" --libdir=lib \
      --buildtype=release --default-library=static \
      -Denable_tools=false -Denable_tests=false -Denable_examples=false >&2 \
    && ninja -C build -j"$jobs" >&2 && ninja -C build install >&2) || die "dav1d build failed"

  make -C "$nvsrc" PREFIX="$prefix" install >&2

  # zlib: Debian 11's own static library. The prefix comes first on the link line (-L), so
  # FFmpeg's -lz finds this libz.a before the system's libz.so.
  cp /usr/lib/x86_64-linux-gnu/libz.a "$prefix/lib/"

  local opts=()
  mapfile -t opts < /build/options
  log "FFmpeg $(basename "$ffsrc"): configure ${opts[*]}"
  export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
  (cd "$ffsrc" && ./configure --prefix="$prefix" --pkg-config-flags=--static "${opts[@]}" >&2) \
    || die "FFmpeg configure failed; see $ffsrc/ffbuild/config.log"
  (cd "$ffsrc" && make -j"$jobs" >&2 && make install >&2) || die "FFmpeg build failed"

  # What the release says about them: versions, FFmpeg's configure line, licences.
  local ffdsc dav1ddsc
  ffdsc=$(basename "$(ls "$src"/ffmpeg_*.dsc)" .dsc)
  dav1ddsc=$(basename "$(ls "$src"/dav1d_*.dsc)" .dsc)
  {
    echo "ffmpeg_version=$(basename "$ffsrc" | sed 's/^ffmpeg-//')"
    echo "ffmpeg_source=Debian 13 (trixie) source package ${ffdsc/_/ }"
    echo "ffmpeg_configure=$(sed -n 's/^#define FFMPEG_CONFIGURATION "\(.*\)"$/\1/p' "$ffsrc/config.h")"
    echo "ffmpeg_license=$(sed -n 's/^#define FFMPEG_LICENSE "\(.*\)"$/\1/p' "$ffsrc/config.h")"
    echo "dav1d_version=$(basename "$dav1dsrc" | sed 's/^dav1d-//')"
    echo "dav1d_source=Debian 13 (trixie) source package ${dav1ddsc/_/ }"
    echo "nv_codec_headers_version=$(basename "$nvsrc" | sed 's/^nv-codec-headers-n\{0,1\}//')"
    echo "zlib_version=$(dpkg-query -W -f='${Version}' zlib1g-dev | sed 's/^[0-9]*://; s/[.+~]dfsg.*//; s/-.*//')"
    echo "zlib_source=Debian 11 (bullseye) package zlib1g-dev $(dpkg-query -W -f='${Version}' zlib1g-dev)"
    echo "glibc_version=$(dpkg-query -W -f='${Version}' libc6)"
  } > "$prefix/build.env"
  cp "$ffsrc/COPYING.LGPLv2.1" "$prefix/licenses/FFmpeg-COPYING.LGPLv2.1"
  cp "$ffsrc/LICENSE.md" "$prefix/licenses/FFmpeg-LICENSE.md"
  cp "$dav1dsrc/COPYING" "$prefix/licenses/dav1d-COPYING"
  sed -n '1,/\*\//p' "$nvsrc/include/ffnvcodec/dynlink_loader.h" > "$prefix/licenses/nv-codec-headers-LICENSE"
  cp /usr/share/doc/zlib1g/copyright "$prefix/licenses/zlib-copyright"
  echo "$key" > "$prefix/.complete"
  log "built dav1d, FFmpeg into $prefix"
}

gobuild() {
  export PATH=/usr/local/go/bin:$PATH HOME=/root GOTOOLCHAIN=local GOPROXY=off GOFLAGS=-mod=readonly
  export PKG_CONFIG_PATH=$prefix/lib/pkgconfig CGO_ENABLED=1
  rm -rf /build/out && mkdir -p /build/out
  cd /build/vidfs
  log "go build ($(go version))"
  # netgo, osusergo: Go's own DNS resolver and user lookup, not glibc's through cgo (which would
  # add libresolv.so.2 to what the binary needs).
  go build -trimpath -buildvcs=false -tags netgo,osusergo -ldflags='-s -w' -o /build/out/vidfs ./cmd/vidfs

  # The Go modules linked in, and their licence texts, one section per licence file.
  log "go-licenses report"
  /build/go-licenses report ./cmd/vidfs --ignore github.com/vidfs/vidfs \
      --template /build/notices.tpl > /build/out/go-licenses.tsv 2>/build/out/go-licenses.log \
    || { cat /build/out/go-licenses.log >&2; die "go-licenses failed"; }
  # One section per licence file (a module, or a part of one with a licence of its own), with
  # the NOTICE file beside it, which Apache-2.0 asks to pass on; go-modules.tsv lists them.
  local modcache; modcache=$(go env GOMODCACHE)
  : > /build/out/go-modules.tsv
  {
    printf 'Go %s: the standard library and runtime (BSD-3-Clause)\n\n' "$(go env GOVERSION | sed 's/^go//')"
    cat "$(go env GOROOT)/LICENSE"
    sort -t$'\t' -k3,3 -u /build/out/go-licenses.tsv | while IFS=$'\t' read -r name lic path; do
      [ -n "$path" ] && [ -f "$path" ] || die "no licence file for $name ($lic)"
      where=${path#"$modcache"/}; where=$(dirname "$where" | sed 's/!\(.\)/\U\1/g')
      printf '%s\t%s\n' "$where" "$lic" >> /build/out/go-modules.tsv
      printf '\n--------------------------------------------------------------------------------\n'
      printf '%s (%s)\n\n' "$where" "$lic"
      cat "$path"
      for notice in "$(dirname "$path")"/NOTICE*; do
        [ -f "$notice" ] || continue
        printf '\n%s:\n\n' "$(basename "$notice")"
        cat "$notice"
      done
    done
  } > /build/out/go-notices.txt
}

case ${1:-} in
  deps) deps "$2" ;;
  go) gobuild ;;
  *) die "usage: dist-inside.sh deps KEY | go" ;;
esac
