#!/usr/bin/env bash
# make dist: the release, built to start on glibc 2.31 and later (Ubuntu 20.04, 22.04, 24.04;
# Debian 11, 12, 13) with nothing but the C library installed:
#
#   dist/vidfs-VERSION-linux-x86_64.tar.gz          vidfs, LICENSE, THIRD_PARTY_NOTICES.txt,
#                                                   FFMPEG.txt (FFmpeg's configure line, sources)
#   dist/vidfs-VERSION-py3-none-manylinux_2_31_x86_64.whl   the Python package, with the same
#                                                   binary as its `vidfs` command
#
# The binary is built in a Debian 11 (bullseye, glibc 2.31) userland made with debootstrap from
# the machine's Debian mirror, with this machine's Go toolchain copied in. dav1d (meson, static),
# FFmpeg (static, scripts/ffmpeg.sh's configure options, Debian 13's sources) and zlib (Debian
# 11's libz.a) are linked in; only libc, libm, libdl, libpthread and the loader stay dynamic, and
# NVDEC's libcuda.so.1 and libnvcuvid.so.1 are loaded at run time, as before.
#
# The userland and its dav1d and FFmpeg builds are cached in ${XDG_CACHE_HOME:-~/.cache}/vidfs/dist
# (first run 33 minutes on a busy 2-core machine, FFmpeg's build most of it; later runs rebuild
# only vidfs, in seconds, or nothing if no file changed). Needs root (debootstrap, chroot),
# debootstrap and Go.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/userland.sh
trap 'exit 130' INT
trap 'exit 143' TERM  # so that the EXIT trap cleans up

log() { echo "dist.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "make dist needs root: it makes a Debian 11 userland with debootstrap and builds vidfs in it with chroot"
command -v debootstrap >/dev/null || die "debootstrap is missing; as root run: apt-get install -y debootstrap"
export PATH=$PATH:/usr/local/go/bin
command -v go >/dev/null || die "Go is not on the PATH"
command -v git >/dev/null && git rev-parse --git-dir >/dev/null 2>&1 || die "make dist runs in a git clone (it builds the files git knows of)"

version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' python/vidfs.py)
[ -n "$version" ] || die "python/vidfs.py has no __version__ line"
name=vidfs-$version-linux-x86_64
wheel=vidfs-$version-py3-none-manylinux_2_31_x86_64.whl

cache=${XDG_CACHE_HOME:-$HOME/.cache}/vidfs/dist
mkdir -p "$cache" dist
exec 9>"$cache/.lock"
flock -n 9 || { log "waiting for another make dist using $cache"; flock 9; }
start=$SECONDS

# 1. The build userland: Debian 11 with the C toolchain, meson, nasm and zlib.
SUITE=bullseye
PACKAGES=build-essential,pkg-config,nasm,meson,ninja-build,zlib1g-dev,xz-utils
root=$cache/build-$SUITE-$(printf '%s\n' "$SUITE" "$PACKAGES" | sha256sum | cut -c1-12)
userland_make "$root" "$SUITE" "$(scripts/debsrc.sh mirror)" "$PACKAGES" ""

trap 'userland_kill "$root"' EXIT  # a build left running when this script is stopped

# 2. dav1d and FFmpeg in it, once per set of options (DEPS_VERSION: bump to rebuild them).
DEPS_VERSION=1
options=$(scripts/ffmpeg.sh --options)
deps_key=$(printf '%s\n' "$DEPS_VERSION" "$options" | sha256sum | cut -c1-12)
if [ "$(cat "$root/opt/vidfs/.complete" 2>/dev/null)" != "$deps_key" ]; then
  log "building dav1d and FFmpeg in the $SUITE userland (FFmpeg alone: 5 minutes on 2 idle cores, up to 30 on busy ones)"
  t=$SECONDS
  rm -rf "$root/build" && mkdir -p "$root/build"
  scripts/debsrc.sh fetch "$root/build/src" trixie ffmpeg dav1d nv-codec-headers:orig
  rm -rf "$root/build/src/apt"
  echo "$options" > "$root/build/options"
  install -m 755 scripts/dist-inside.sh "$root/build/"
  userland_run "$root" -- env JOBS="$(nproc)" /build/dist-inside.sh deps "$deps_key"
  rm -rf "$root/build/src"  # a gigabyte of objects; /opt/vidfs is what is kept
  log "dav1d and FFmpeg built in $((SECONDS - t)) s"
fi

# 3. vidfs: skipped when neither the files git knows of, the dependencies nor Go changed.
stage=$(mktemp -d "$cache/stage.XXXXXX")
trap 'rm -rf "$stage"; userland_kill "$root"' EXIT
goroot=$(go env GOROOT)
gover=$(go env GOVERSION)
git ls-files -z -co --exclude-standard | xargs -0 -r sh -c 'for f; do [ -f "$f" ] && printf "%s\0" "$f"; done; true' sh > "$stage/files"
key=$( { xargs -0 -r sha256sum < "$stage/files"; echo "$deps_key $gover"; } | sha256sum | cut -c1-16)
if [ "$(cat dist/.key 2>/dev/null)" = "$key" ] && [ -f "dist/$name.tar.gz" ] && [ -f "dist/$wheel" ]; then
  log "dist/$name.tar.gz and dist/$wheel are up to date"
  exit 0
fi
rm -f dist/.key

# Go: this machine's toolchain, copied in when it changes; its modules, downloaded here and
# bound read-only into the userland (the build inside has no network).
if [ "$(head -n1 "$root/usr/local/go/VERSION" 2>/dev/null)" != "$gover" ]; then
  log "copying Go $gover ($goroot) into the userland"
  rm -rf "$root/usr/local/go" && cp -a "$goroot" "$root/usr/local/go"
fi
go mod download
GO_LICENSES=github.com/google/go-licenses@v1.6.0
tools=$cache/tools/go-licenses-v1.6.0
[ -x "$tools/go-licenses" ] || { log "go install $GO_LICENSES"; GOBIN=$tools CGO_ENABLED=0 go install "$GO_LICENSES"; }
install -m 755 "$tools/go-licenses" scripts/dist-inside.sh "$root/build/"
printf '{{range .}}{{.Name}}\t{{.LicenseName}}\t{{.LicensePath}}\n{{end}}' > "$root/build/notices.tpl"
rm -rf "$root/build/vidfs" && mkdir -p "$root/build/vidfs"
tar --null -T "$stage/files" -cf - | tar -C "$root/build/vidfs" -xf -
t=$SECONDS
userland_run "$root" ro "$(go env GOMODCACHE)" /root/go/pkg/mod -- /build/dist-inside.sh go
log "vidfs built in the $SUITE userland in $((SECONDS - t)) s"
bin=$root/build/out/vidfs

# 4. What it needs at run time, and that it runs and says who it is.
scripts/check-binary.sh "$bin"
[ "$("$bin" --version)" = "vidfs $version" ] || die "the binary says '$("$bin" --version)', not 'vidfs $version'"
ffcfg=$("$bin" version | sed -n 's/^configure: *//p')
case " $ffcfg " in *" --enable-gpl "*|*" --enable-nonfree "*) die "FFmpeg was configured with --enable-gpl or --enable-nonfree: $ffcfg" ;; esac

# 5. The tarball and the wheel, with the licences and notices of everything linked in.
built() { sed -n "s/^$1=//p" "$root/opt/vidfs/build.env"; }
ffmpeg_version=$(built ffmpeg_version) ffmpeg_source=$(built ffmpeg_source)
ffmpeg_configure=$(built ffmpeg_configure) ffmpeg_license=$(built ffmpeg_license)
dav1d_version=$(built dav1d_version) dav1d_source=$(built dav1d_source)
zlib_version=$(built zlib_version) zlib_source=$(built zlib_source)
nv_codec_headers_version=$(built nv_codec_headers_version) glibc_version=$(built glibc_version)
epoch=$(git log -1 --format=%ct 2>/dev/null || date +%s)
d=$stage/$name
mkdir -p "$d"
cp "$bin" "$d/vidfs"
cp LICENSE "$d/LICENSE"
lic=$root/opt/vidfs/licenses
section() { printf '\n================================================================================\n%s\n================================================================================\n\n' "$1"; }
{
  cat <<EOF
Third-party software in vidfs $version

The vidfs binary (the tarball's vidfs, the wheel's vidfs command) links these statically:

  FFmpeg $ffmpeg_version (libavcodec, libavformat, libavfilter, libavutil, libswscale,
    libswresample, libavdevice; FFMPEG.txt says which sources, how configured)   LGPL-2.1-or-later
  dav1d $dav1d_version   BSD-2-Clause
  zlib $zlib_version   Zlib
  nv-codec-headers $nv_codec_headers_version (FFmpeg's loader of the NVIDIA driver)   MIT
  Go ${gover#go} (standard library, runtime)   BSD-3-Clause
  Go modules (found with $GO_LICENSES):
$(awk -F'\t' '{printf "    %-80s %s\n", $1, $2}' "$root/build/out/go-modules.tsv")

glibc (libc, libm, libdl, libpthread) is not included: it is the system's own, loaded at run
time, as are the NVIDIA driver's libcuda.so.1 and libnvcuvid.so.1 when a GPU is used.
Their licence texts follow.
EOF
  section "FFmpeg $ffmpeg_version: GNU Lesser General Public License, version 2.1 or later"
  cat "$lic/FFmpeg-LICENSE.md"; echo; cat "$lic/FFmpeg-COPYING.LGPLv2.1"
  section "dav1d $dav1d_version: BSD-2-Clause"
  cat "$lic/dav1d-COPYING"
  section "zlib $zlib_version: Zlib (Debian's copyright file)"
  cat "$lic/zlib-copyright"
  section "nv-codec-headers $nv_codec_headers_version: MIT"
  cat "$lic/nv-codec-headers-LICENSE"
  section "Go and Go modules"
  cat "$root/build/out/go-notices.txt"
} > "$d/THIRD_PARTY_NOTICES.txt"
cat > "$d/FFMPEG.txt" <<EOF
FFmpeg in vidfs $version

Version:    FFmpeg $ffmpeg_version
Source:     $ffmpeg_source
            (the upstream release with Debian's patches; apt-get source ffmpeg/trixie, or
            https://deb.debian.org/debian/pool/main/f/ffmpeg/)
Licence:    $ffmpeg_license (no --enable-gpl, no --enable-nonfree)
Linked:     statically, with dav1d $dav1d_version ($dav1d_source, meson,
            -Ddefault_library=static) and zlib ($zlib_source)
Built in:   Debian 11 (bullseye), glibc $glibc_version, by scripts/dist.sh of the vidfs repository
Configure line, as FFmpeg records it (vidfs version prints it too):

  $ffmpeg_configure

To use vidfs with another build of FFmpeg (the LGPL's right to relink), build vidfs from its
source (README.md, "From source"): scripts/ffmpeg.sh and scripts/dist.sh say how FFmpeg is
built and linked, and a system FFmpeg 7.1 found by pkg-config is used instead when present.
EOF
cat > "$d/README.txt" <<EOF
vidfs $version for Linux x86-64: video training data served as tensor files through FUSE.

  ./vidfs version                   what it is built with, and whether a GPU is usable here
  ./vidfs mount SRC MNT --frames 16 --size 224x224
  ./vidfs help

It needs glibc 2.31 or later and FUSE (the fuse3 package's fusermount3); FFmpeg, dav1d and zlib
are inside. NVDEC decoding uses the NVIDIA driver's libraries when they are installed.
Licences: LICENSE (vidfs, Apache-2.0), THIRD_PARTY_NOTICES.txt, FFMPEG.txt.
EOF
rm -f dist/vidfs-*.tar.gz dist/vidfs-*.whl
tar -C "$stage" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" -cf - "$name" \
  | gzip -n -9 > "dist/$name.tar.gz"
/usr/bin/python3 scripts/wheel.py --binary "$d/vidfs" --epoch "$epoch" --out dist \
  "$d/LICENSE" "$d/THIRD_PARTY_NOTICES.txt" "$d/FFMPEG.txt"
echo "$key" > dist/.key
log "wrote dist/$name.tar.gz ($(du -h "dist/$name.tar.gz" | cut -f1)) and dist/$wheel ($(du -h "dist/$wheel" | cut -f1)) in $((SECONDS - start)) s"
