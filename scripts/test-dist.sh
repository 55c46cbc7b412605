#!/usr/bin/env bash
# make test-dist: the release that make dist wrote, checked as users get it.
#
# 1. The binary (the tarball's, and the wheel's, which must be the same file) needs only libc,
#    libm, libdl, libpthread and the loader, and no glibc symbol newer than 2.31
#    (scripts/check-binary.sh); the tarball holds the licences and FFmpeg's configure line.
# 2. The host's own build (bin/vidfs) mounts testdata/videos and every sample is read through
#    np.load(mmap_mode="r"): the reference.
# 3. In minbase userlands made with debootstrap, Ubuntu 22.04 (jammy) and 24.04 (noble) from the
#    Ubuntu archive of the machine's mirror (the Debian mirror's host, /ubuntu; no Ubuntu keyring
#    on Debian, so --no-check-gpg) and Debian 11 (bullseye), with fuse3, python3-venv and
#    python3-numpy: the wheel is installed with pip --no-index into a fresh venv, `vidfs version`
#    runs, the videos are mounted with /dev/fuse bound in, every sample is read the same way and
#    must match the reference byte for byte, and the mount is unmounted
#    (scripts/test-dist-inside.sh).
#
# The userlands are cached in ${XDG_CACHE_HOME:-~/.cache}/vidfs/test-dist (about a minute each
# to make; a second run takes well under a minute). Every mount it makes is in a private mount
# namespace (scripts/userland.sh), so none outlives it. Needs root, debootstrap, fuse3 and NumPy.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/userland.sh
trap 'exit 130' INT
trap 'exit 143' TERM  # so that the EXIT trap cleans up

log() { echo "test-dist.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "make test-dist needs root (debootstrap, chroot, mounts)"
command -v debootstrap >/dev/null || die "debootstrap is missing; as root run: apt-get install -y debootstrap"
[ -e /dev/fuse ] || die "/dev/fuse is missing: this machine cannot mount FUSE filesystems"
[ -x bin/vidfs ] || die "bin/vidfs is missing (make build)"

version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' python/vidfs.py)
name=vidfs-$version-linux-x86_64
tarball=dist/$name.tar.gz
wheel=dist/vidfs-$version-py3-none-manylinux_2_31_x86_64.whl
[ -f "$tarball" ] && [ -f "$wheel" ] || die "$tarball or $wheel is missing (make dist)"

cache=${XDG_CACHE_HOME:-$HOME/.cache}/vidfs/test-dist
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock -n 9 || { log "waiting for another make test-dist using $cache"; flock 9; }
start=$SECONDS

# Samples of 8 x 128 x 128 x 3 bytes (96 pages: memory-mapped reads touch no neighbour); zeros
# for samples that fail, so that a memory-mapped reader is not killed by SIGBUS; CPU decoding,
# whatever GPU the host has, so that every system decodes the same way.
MOUNT_FLAGS=(--frames 8 --stride 2 --size 128x128 --cache-mem 256MiB --on-error zeros --probe-cache "" --hwaccel none)

work=$(mktemp -d /tmp/vidfs-test-dist.XXXXXX)
host_pid=
userlands=()
cleanup() {
  if [ -n "$host_pid" ]; then kill -INT "$host_pid" 2>/dev/null || true; wait "$host_pid" 2>/dev/null || true; fi
  ! mountpoint -q "$work/mnt" 2>/dev/null || fusermount3 -u -z "$work/mnt" || true
  local u
  for u in "${userlands[@]}"; do userland_kill "$u"; done
  userland_rm "$work" || true
}
trap cleanup EXIT

# 1. What the binary needs, and what the tarball and the wheel hold.
t=$SECONDS
tar -C "$work" -xzf "$tarball"
for f in vidfs LICENSE THIRD_PARTY_NOTICES.txt FFMPEG.txt; do
  [ -s "$work/$name/$f" ] || die "$tarball has no $name/$f"
done
/usr/bin/python3 - "$wheel" "$work/wheel-vidfs" <<'EOF'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
names = z.namelist()
script = [n for n in names if n.endswith(".data/scripts/vidfs")]
assert len(script) == 1 and "vidfs.py" in names, names
assert any(n.endswith(".dist-info/licenses/THIRD_PARTY_NOTICES.txt") for n in names), names
meta = z.read([n for n in names if n.endswith(".dist-info/METADATA")][0]).decode()
reqs = [l for l in meta.splitlines() if l.startswith("Requires-Dist:") and "extra ==" not in l]
assert reqs == ["Requires-Dist: numpy"], reqs
open(sys.argv[2], "wb").write(z.read(script[0]))
EOF
cmp -s "$work/$name/vidfs" "$work/wheel-vidfs" || die "the wheel's vidfs is not the tarball's"
scripts/check-binary.sh "$work/$name/vidfs"
# FFmpeg's configure line as the binary reports it: LGPL only, and the one FFMPEG.txt gives.
report=$("$work/$name/vidfs" version)
configure=$(sed -n 's/^configure: *//p' <<<"$report")
case " $configure " in *" --enable-gpl "*|*" --enable-nonfree "*|"  ") die "FFmpeg's configure line: '$configure'" ;; esac
grep -qxF "  $configure" "$work/$name/FFMPEG.txt" || die "FFMPEG.txt does not give the binary's configure line ($configure)"
grep -q '^FFmpeg: .*(LGPL version 2.1 or later)$' <<<"$report" || die "the binary's FFmpeg is not LGPL version 2.1 or later: $(grep '^FFmpeg:' <<<"$report")"
log "binary and contents checked in $((SECONDS - t)) s"

# 2. The reference: the host's own build, mounted and read the same way.
t=$SECONDS
mkdir -p "$work/mnt"
bin/vidfs mount testdata/videos "$work/mnt" "${MOUNT_FLAGS[@]}" 2> "$work/host-mount.log" &
host_pid=$!
for _ in $(seq 200); do
  [ -e "$work/mnt/.vidfs/stats" ] && break
  kill -0 "$host_pid" 2>/dev/null || { cat "$work/host-mount.log" >&2; die "bin/vidfs mount exited"; }
  sleep 0.1
done
[ -e "$work/mnt/.vidfs/stats" ] || { cat "$work/host-mount.log" >&2; die "the host's mount did not come up in 20 s"; }
log "host (bin/vidfs): $(/usr/bin/python3 scripts/dist-read.py "$work/mnt" "$work/host.txt")"
kill -INT "$host_pid"
wait "$host_pid" || { cat "$work/host-mount.log" >&2; die "bin/vidfs mount exited with an error"; }
host_pid=
log "reference read in $((SECONDS - t)) s"

# 3. The userlands.
cp "$wheel" scripts/dist-read.py scripts/test-dist-inside.sh "$work/"
debian=$(scripts/debsrc.sh mirror)
ubuntu=${VIDFS_UBUNTU_MIRROR:-${debian%/debian}/ubuntu}
PACKAGES=fuse3,python3-venv,python3-numpy
passed=()
for spec in "jammy $ubuntu jammy" "noble $ubuntu jammy" "bullseye $debian -"; do
  read -r suite mirror script <<<"$spec"
  opts=()
  if [ "$mirror" = "$ubuntu" ]; then opts=(--no-check-gpg --components=main,universe); fi
  [ "$script" = - ] && script= || script=/usr/share/debootstrap/scripts/$script
  dir=$cache/$suite-$(printf '%s\n' "$suite" "$mirror" "$PACKAGES" "${opts[@]}" | sha256sum | cut -c1-12)
  userlands+=("$dir")
  t=$SECONDS
  userland_make "$dir" "$suite" "$mirror" "$PACKAGES" "$script" "${opts[@]}"
  userland_kill "$dir"  # a mount left running by a run that was killed
  userland_run "$dir" rw "$work" /t ro "$PWD/testdata/videos" /videos -- \
    /bin/bash /t/test-dist-inside.sh "$suite" "/t/$(basename "$wheel")" "${MOUNT_FLAGS[@]}"
  if ! cmp -s "$work/host.txt" "$work/$suite.txt"; then
    diff "$work/host.txt" "$work/$suite.txt" | head -n 20 >&2 || true
    die "$suite: the samples read there differ from the host's (above: < host, > $suite)"
  fi
  passed+=("$suite")
  log "$suite: the wheel installs, vidfs version runs, every sample matches the host's ($((SECONDS - t)) s)"
done
log "passed in ${passed[*]}, in $((SECONDS - start)) s"
