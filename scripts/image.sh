#!/usr/bin/env bash
# The container image (deploy/image/Dockerfile), built with podman, and the local base images its
# tests build it on (no registry is needed: a debootstrap userland imported with podman import).
#
# Usage:
#   scripts/image.sh build TAG CONTEXT [BASE]
#       podman build of deploy/image/Dockerfile as TAG, CONTEXT being a directory that holds one
#       vidfs-VERSION-linux-x86_64.tar.gz (dist/ after make dist); BASE is the Dockerfile's
#       build argument (default: its own, ubuntu:24.04 from a registry).
#   scripts/image.sh base SUITE
#       makes, once, a local base image from a minbase userland of SUITE, and prints its name:
#       noble (Ubuntu 24.04) with fuse3, for the release; bookworm (Debian 12) with fuse3 and
#       libdav1d6, for this machine's own build (bin/vidfs links Debian 12's libdav1d.so.6).
#       Userlands are made with scripts/userland.sh into ${XDG_CACHE_HOME:-~/.cache}/vidfs/image
#       (about a minute each, once); the image is named localhost/vidfs-base-SUITE:HASH, HASH
#       of what it was made from, so a changed recipe makes a new one.
#
# Needs root, podman (and runc: scripts/setup.sh test installs both and writes containers.conf)
# and, for base, debootstrap.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/userland.sh

log() { echo "image.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "needs root (podman as root, debootstrap)"
command -v podman >/dev/null || die "podman is missing; as root run: apt-get install -y podman runc"

base() {
  local suite=$1 mirror script packages opts=()
  local debian; debian=$(scripts/debsrc.sh mirror)
  case $suite in
    noble)
      mirror=${VIDFS_UBUNTU_MIRROR:-${debian%/debian}/ubuntu}
      script=/usr/share/debootstrap/scripts/jammy  # Debian 12's debootstrap has no noble script
      packages=fuse3
      opts=(--no-check-gpg --components=main,universe) ;;
    bookworm)
      mirror=$debian script= packages=fuse3,libdav1d6 ;;
    *) die "unknown base suite '$suite' (noble or bookworm)" ;;
  esac
  command -v debootstrap >/dev/null || die "debootstrap is missing; as root run: apt-get install -y debootstrap"
  local cache=${XDG_CACHE_HOME:-$HOME/.cache}/vidfs/image
  local key; key=$(printf '%s\n' "$suite" "$mirror" "$packages" "${opts[@]}" | sha256sum | cut -c1-12)
  local name=localhost/vidfs-base-$suite:$key
  mkdir -p "$cache"
  exec 9>"$cache/.lock-$suite"
  flock 9
  if ! podman image exists "$name"; then
    local dir=$cache/$suite-$key
    userland_make "$dir" "$suite" "$mirror" "$packages" "$script" "${opts[@]}"
    log "importing $dir as $name"
    tar -C "$dir" --numeric-owner --exclude=./.complete -cf - . | podman import - "$name" >/dev/null
  fi
  echo "$name"
}

build() {
  local tag=$1 context=$2 base=${3:-}
  set -- "$context"/vidfs-*-linux-x86_64.tar.gz
  [ "$#" -eq 1 ] && [ -f "$1" ] || die "$context must hold exactly one vidfs-*-linux-x86_64.tar.gz (make dist writes it into dist/)"
  podman build --quiet --layers=false -f deploy/image/Dockerfile ${base:+--build-arg "BASE=$base"} -t "$tag" "$context" >/dev/null
  log "built $tag from $1${base:+ on $base}"
}

case ${1:-} in
  base) [ $# -eq 2 ] || die "usage: scripts/image.sh base SUITE"; base "$2" ;;
  build) [ $# -ge 3 ] && [ $# -le 4 ] || die "usage: scripts/image.sh build TAG CONTEXT [BASE]"; shift; build "$@" ;;
  *) die "usage: scripts/image.sh base SUITE | build TAG CONTEXT [BASE]" ;;
esac
