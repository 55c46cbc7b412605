#!/usr/bin/env bash
# Installs the Debian 12 packages vidfs needs for one purpose, then makes sure FFmpeg 7.1 is
# built (scripts/ffmpeg.sh). As root it installs them; otherwise it prints the exact
# apt-get line to run and fails.
#
# Usage: scripts/setup.sh build|test|demo|bench|dist|test-dist|image
set -euo pipefail
purpose=${1:-build}

# Build: compilers, FFmpeg's build needs (nasm, dav1d for AV1, zlib), apt-get source (dpkg-dev).
pkgs=(build-essential pkg-config nasm dpkg-dev libdav1d-dev zlib1g-dev ca-certificates xz-utils)
case $purpose in
  build) ;;
  # Tests: FUSE, Debian's ffmpeg CLI (test videos and reference decodes), real footage
  # (opencv-doc's Megamind.avi), NumPy for the Python client tests, torch for the DDP test, venv,
  # pip and setuptools for the package's install test, fio, tmux (vidfs top's test); podman, runc
  # and debootstrap for the container image's tests (deploy/image: a local base from a userland).
  test) pkgs+=(fuse3 ffmpeg opencv-doc python3-numpy fio tmux python3-torch python3-venv python3-pip python3-setuptools podman runc debootstrap) ;;
  demo) pkgs+=(fuse3 python3-numpy) ;;
  # Benchmarks: the loaders vidfs is compared with, matplotlib for the chart, and s3fs-fuse (the
  # general-purpose FUSE client of a bucket that bench/s3.py puts under vidfs).
  bench) pkgs+=(fuse3 ffmpeg opencv-doc python3-numpy python3-av python3-opencv python3-torch python3-matplotlib fio s3fs) ;;
  # The release (scripts/dist.sh): debootstrap makes the Debian 11 userland it is built in; it
  # needs no FFmpeg of this machine's. Its tests: userlands again, FUSE and NumPy for the reference.
  dist) pkgs+=(debootstrap) ;;
  test-dist) pkgs+=(debootstrap fuse3 python3-numpy) ;;
  # The container image (make image): podman and runc to build it, debootstrap for a local base.
  image) pkgs+=(podman runc debootstrap) ;;
  *) echo "setup.sh: unknown purpose '$purpose' (build, test, demo, bench, dist, test-dist or image)" >&2; exit 2 ;;
esac

# apt_holder prints "PID (NAME) holding FILE" when another process holds one of apt's or dpkg's
# locks (a POSIX lock on the file's inode in /proc/locks, as apt and dpkg take them), else nothing.
apt_holder() {
  local f ino pid
  for f in /var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/lib/apt/lists/lock /var/cache/apt/archives/lock; do
    ino=$(stat -c %i "$f" 2>/dev/null) || continue
    pid=$(awk -v ino="$ino" '$2 == "POSIX" { n = split($6, d, ":"); if (d[n] == ino) { print $5; exit } }' /proc/locks 2>/dev/null) || true
    if [ -n "$pid" ]; then
      echo "$pid ($(cat /proc/"$pid"/comm 2>/dev/null || echo gone)) holding $f"
      return
    fi
  done
}

# apt_get runs apt-get with its arguments once no other apt or dpkg holds their locks (unattended
# upgrades do, for minutes, on a fresh cloud machine), waiting up to 10 minutes in all and saying
# so. apt-get's own DPkg::Lock::Timeout covers dpkg's locks taken in the meantime; apt-get update
# does not wait for the package lists' lock, so a run that fails while a lock is held by another
# process is tried again, within the same 10 minutes.
apt_get() {
  local deadline=$((SECONDS + 600)) holder said= rc
  while :; do
    holder=$(apt_holder)
    if [ -n "$holder" ] && [ "$SECONDS" -lt "$deadline" ]; then
      if [ -z "$said" ]; then
        echo "setup.sh: another apt or dpkg process is at work ($holder): waiting for it to finish, up to 10 minutes" >&2
        said=1
      fi
      sleep 2
      continue
    fi
    [ -z "$said" ] || echo "setup.sh: apt and dpkg are free; apt-get $*" >&2
    said=
    rc=0
    apt-get -o DPkg::Lock::Timeout=$((deadline > SECONDS ? deadline - SECONDS : 0)) "$@" >&2 || rc=$?
    if [ "$rc" -ne 0 ] && [ -n "$(apt_holder)" ] && [ "$SECONDS" -lt "$deadline" ]; then
      continue # another apt took a lock between the look and apt-get's
    fi
    return "$rc"
  done
}

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup.sh: missing Debian packages for '$purpose'. As root, run:" >&2
    echo "  apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
  fi
  echo "setup.sh: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt_get update -q
  apt_get install -y -q --no-install-recommends "${missing[@]}"
fi

# Go: go.mod asks for 1.26; any Go from 1.21 on fetches that toolchain through the module proxy.
if ! command -v go >/dev/null; then
  if [ -x /usr/local/go/bin/go ]; then
    echo "setup.sh: Go is at /usr/local/go/bin but not on PATH; add it: export PATH=\$PATH:/usr/local/go/bin" >&2
  else
    echo "setup.sh: Go is not installed; install Go 1.26 or later (Debian 12's golang is too old)" >&2
  fi
  exit 1
fi

if [ "$purpose" != build ] && [ "$purpose" != dist ] && [ "$purpose" != image ] && [ ! -e /dev/fuse ]; then
  echo "setup.sh: /dev/fuse is missing: this machine cannot mount FUSE filesystems (try: modprobe fuse)" >&2
  exit 1
fi

[ "$purpose" = dist ] || [ "$purpose" = image ] || "$(dirname "$0")/ffmpeg.sh" >/dev/null

# Containers (the image's tests): Debian 12's podman runs them as root with runc and cgroupfs
# (crun fails there: "cgroups in hybrid mode not supported"), and with no default ulimits (else
# "setrlimit RLIMIT_NOFILE: Operation not permitted"). Written only where no containers.conf is.
if { [ "$purpose" = test ] || [ "$purpose" = image ]; } && [ "$(id -u)" -eq 0 ] && [ ! -e /etc/containers/containers.conf ]; then
  echo "setup.sh: writing /etc/containers/containers.conf (runc, cgroupfs, no default ulimits) for podman" >&2
  mkdir -p /etc/containers
  cat > /etc/containers/containers.conf <<'EOF'
# Written by vidfs's scripts/setup.sh test, for podman run as root on Debian 12.
[containers]
default_ulimits = []

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
EOF
fi

# Tests and benchmarks: versitygw, the S3 server the object storage tests and bench/s3.py start (built once, about 3 minutes,
# into the cache). A build that fails stops here, so that make test and CI never pass with the S3 tests skipped; `go test`
# run by hand without it skips them, saying how to build it.
if [ "$purpose" = test ] || [ "$purpose" = bench ]; then
  vgw_dir=${XDG_CACHE_HOME:-$HOME/.cache}/vidfs/versitygw
  if [ ! -x "$vgw_dir/versitygw" ]; then
    echo "setup.sh: building versitygw v1.8.0 (the tests' S3 server) into $vgw_dir" >&2
    GOBIN=$vgw_dir "${GO:-go}" install github.com/versity/versitygw/cmd/versitygw@v1.8.0 >&2
  fi
fi

# Tests: real videos vidfs once served wrongly, from Debian's own packages (testdata/real.sh: a few
# MB, fetched once into the cache; the tests that hold them fail, naming the script, without them).
if [ "$purpose" = test ]; then
  "$(dirname "$0")/../testdata/real.sh"
fi

# Tests: the Debian 12 base image the container image's tests (deploy/image) build this machine's
# vidfs on, made once with debootstrap (about a minute) and kept as a local image by scripts/image.sh,
# here rather than in the test run. As root only: the tests skip the image without root.
if [ "$purpose" = test ] && [ "$(id -u)" -eq 0 ]; then
  "$(dirname "$0")/image.sh" base bookworm >/dev/null
fi
