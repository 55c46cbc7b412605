#!/bin/bash
# make test-dist's part inside a test userland (scripts/test-dist.sh runs it with chroot, the
# host's work folder bound at /t and testdata/videos at /videos): install the wheel into a fresh
# venv as a user would, run `vidfs version`, mount the videos, read every sample through
# np.load(mmap_mode="r") (scripts/dist-read.py) into /t/NAME.txt, unmount.
#
# Usage: test-dist-inside.sh NAME WHEEL MOUNT_FLAG...
set -euo pipefail
name=$1 wheel=$2; shift 2
fail() { echo "test-dist ($name): $*" >&2; exit 1; }

. /etc/os-release
echo "$name: $PRETTY_NAME, $(ldd --version | sed -n '1{s/.* //;s/^/glibc /;p}'), $(python3 -V)"
rm -rf /tmp/venv /tmp/mnt
python3 -m venv --system-site-packages /tmp/venv
/tmp/venv/bin/pip install --no-index --disable-pip-version-check -q "$wheel" || fail "pip install --no-index $wheel failed"
export PATH=/tmp/venv/bin:$PATH
[ "$(command -v vidfs)" = /tmp/venv/bin/vidfs ] || fail "the wheel put no vidfs command on the venv's PATH"
vidfs version > "/t/$name-version.txt" || { cat "/t/$name-version.txt"; fail "vidfs version failed"; }
grep -E '^(vidfs|FFmpeg|glibc|GPU)' "/t/$name-version.txt" | sed 's/^/  /'
py=$(python -c 'import vidfs; print("vidfs " + vidfs.__version__)')
[ "$py" = "$(vidfs --version)" ] || fail "vidfs.__version__ says '$py', vidfs --version '$(vidfs --version)'"

mkdir -p /tmp/mnt
vidfs mount /videos /tmp/mnt "$@" 2> /tmp/mount.log &
pid=$!
stop() {
  kill -INT "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  ! mountpoint -q /tmp/mnt || fusermount3 -u -z /tmp/mnt || true
}
trap stop EXIT
for _ in $(seq 200); do
  [ -e /tmp/mnt/.vidfs/stats ] && break
  kill -0 "$pid" 2>/dev/null || { cat /tmp/mount.log >&2; fail "vidfs mount exited"; }
  sleep 0.1
done
[ -e /tmp/mnt/.vidfs/stats ] || { cat /tmp/mount.log >&2; fail "the mount did not come up in 20 s"; }
echo "  $(python /t/dist-read.py /tmp/mnt "/t/$name.txt")"
kill -INT "$pid"
wait "$pid" || { cat /tmp/mount.log >&2; fail "vidfs mount exited with status $? when interrupted"; }
trap - EXIT
! mountpoint -q /tmp/mnt || fail "/tmp/mnt is still mounted after vidfs mount ended"
echo "  mounted, read and unmounted"
