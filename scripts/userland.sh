# Userlands made with debootstrap, cached, and commands run in them with chroot. Sourced by
# scripts/dist.sh and scripts/test-dist.sh; needs root.
#
# Every mount (debootstrap's own /proc and /sys, a userland's /proc, bind mounts of the host's
# files and /dev/fuse, a FUSE mount made inside) is made in a private mount namespace (unshare
# --mount) that ends with the command: nothing is left mounted on the host, however the command
# ends, so a cached userland can always be deleted or reused as it is.

# userland_make DIR SUITE MIRROR PACKAGES SCRIPT [DEBOOTSTRAP_OPTION...]
# Makes a minbase userland of SUITE with PACKAGES (comma-separated) in DIR, unless DIR is
# already complete; SCRIPT is debootstrap's script for SUITE ("": its own). It is made in
# DIR.tmp and renamed, so an interrupted run leaves no DIR.
userland_make() {
  local dir=$1 suite=$2 mirror=$3 include=$4 script=$5; shift 5
  [ -f "$dir/.complete" ] && return 0
  local start=$SECONDS
  echo "userland: debootstrap $suite from $mirror into $dir (about a minute)" >&2
  mkdir -p "$(dirname "$dir")"
  local try
  for try in 1 2; do  # a second try for a mirror's passing failure
    userland_rm "$dir.tmp"
    if unshare --mount --propagation private -- \
        debootstrap --variant=minbase --include="$include" "$@" "$suite" "$dir.tmp" "$mirror" ${script:+"$script"} \
        >"$dir.log" 2>&1; then
      break
    fi
    tail -n 20 "$dir.log" >&2
    echo "userland: debootstrap $suite failed (try $try of 2); its log is $dir.log" >&2
    [ "$try" = 2 ] && return 1
  done
  echo "$suite $include" > "$dir.tmp/.complete"
  userland_rm "$dir"
  mv "$dir.tmp" "$dir"
  echo "userland: $suite ready in $((SECONDS - start)) s" >&2
}

# userland_rm DIR: deletes a userland, refusing if anything is mounted inside it.
userland_rm() {
  local dir=$1
  [ -e "$dir" ] || return 0
  local mounts; mounts=$(findmnt -rn -o TARGET)  # not piped into grep -q: pipefail, SIGPIPE
  if grep -q "^$(realpath "$dir")/" <<<"$mounts"; then
    echo "userland: refusing to delete $dir: something is mounted inside it" >&2
    return 1
  fi
  rm -rf --one-file-system "$dir"
}

# userland_kill DIR: ends the processes left running in a userland (their root is DIR), such as
# a FUSE server whose script was killed; by pid, and only those.
userland_kill() {
  local dir p r
  dir=$(realpath "$1")
  for p in /proc/[0-9]*; do
    r=$(readlink "$p/root" 2>/dev/null) || continue
    case $r in "$dir"|"$dir"/*) kill -KILL "${p#/proc/}" 2>/dev/null || true ;; esac
  done
}

# userland_run DIR [ro|rw SRC DST]... -- COMMAND...
# Runs COMMAND in DIR with chroot, in a private mount namespace with /proc mounted, each SRC
# bound at DST (a path inside DIR; ro: read-only) and /dev/fuse bound in if the host has it. The
# environment is emptied but for PATH, HOME, LANG and what COMMAND sets with env.
userland_run() {
  local dir=$1; shift
  unshare --mount --propagation private -- /bin/bash -euc '
    dir=$1; shift
    mount -t proc proc "$dir/proc"
    if [ -e /dev/fuse ]; then
      [ -e "$dir/dev/fuse" ] || touch "$dir/dev/fuse"
      mount --bind /dev/fuse "$dir/dev/fuse"
    fi
    while [ "$1" != -- ]; do
      mode=$1 src=$2 dst=$dir$3; shift 3
      if [ -d "$src" ]; then mkdir -p "$dst"; else mkdir -p "$(dirname "$dst")"; [ -e "$dst" ] || touch "$dst"; fi
      mount --bind "$src" "$dst"
      if [ "$mode" = ro ]; then mount -o remount,bind,ro "$dst"; fi
    done
    shift
    exec chroot "$dir" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      HOME=/root LANG=C.UTF-8 "$@"
  ' userland_run "$dir" "$@"
}
