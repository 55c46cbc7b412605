#!/usr/bin/env bash
# Debian source packages and the machine's own Debian mirror, for the FFmpeg builds
# (scripts/ffmpeg.sh, scripts/dist.sh) and the test userlands (scripts/test-dist.sh).
#
# Usage: scripts/debsrc.sh mirror                 # prints the Debian mirror this machine uses
#        scripts/debsrc.sh fetch DIR SUITE PKG...  # apt-get source PKG (of SUITE) into DIR
#
# fetch goes through a private apt state directory (DIR/apt): the machine's apt configuration is
# never edited. A PKG written NAME:orig fetches only the upstream tarball and unpacks it (the
# mirror has been seen to lack nv-codec-headers' Debian diff).
set -euo pipefail

log() { echo "debsrc.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }

# The Debian mirror from the machine's sources (deb822 .sources or one-line sources.list).
mirror() {
  local m
  m=$(
    { cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '/^URIs:/{for(i=2;i<=NF;i++)print $i}'
      cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | awk '$1=="deb"||$1=="deb-src"{for(i=2;i<=NF;i++) if($i ~ /:\/\//){print $i; break}}'
    } | grep -E '/debian/?$' | head -n1 || true)
  [ -n "$m" ] || die "found no Debian mirror in /etc/apt/sources.list{,.d/}"
  echo "${m%/}"
}

fetch() {
  local dir=$1 suite=$2; shift 2
  local m; m=$(mirror)
  log "fetching ${*} ($suite) from $m"
  mkdir -p "$dir"/apt/{lists/partial,cache/archives/partial,etc/sources.list.d,etc/preferences.d}
  echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $m $suite main" > "$dir/apt/etc/sources.list"
  local apt_opts=(
    -o "Dir::Etc::SourceList=$dir/apt/etc/sources.list"
    -o "Dir::Etc::SourceParts=$dir/apt/etc/sources.list.d"
    -o "Dir::Etc::Preferences=$dir/apt/etc/preferences"
    -o "Dir::Etc::PreferencesParts=$dir/apt/etc/preferences.d"
    -o "Dir::State::Lists=$dir/apt/lists"
    -o "Dir::Cache=$dir/apt/cache"
    -o "Debug::NoLocking=1"
    -o "APT::Sandbox::User=$(id -un)"
  )
  apt-get -q "${apt_opts[@]}" update >&2 || die "apt-get update for $suite sources failed"
  local p
  for p in "$@"; do
    case $p in
      *:orig) (cd "$dir" && apt-get -q "${apt_opts[@]}" source --tar-only "${p%:orig}" >&2 \
                && tar -xf "${p%:orig}"_*.orig.tar.* >&2) || die "apt-get source --tar-only ${p%:orig} ($suite) failed" ;;
      *) (cd "$dir" && apt-get -q "${apt_opts[@]}" source "$p" >&2) || die "apt-get source $p ($suite) failed" ;;
    esac
  done
}

case ${1:-} in
  mirror) mirror ;;
  fetch) [ $# -ge 4 ] || die "usage: debsrc.sh fetch DIR SUITE PKG..."; shift; fetch "$@" ;;
  *) die "usage: debsrc.sh mirror | fetch DIR SUITE PKG..." ;;
esac
