#!/usr/bin/env bash
# Fetches real videos that vidfs once served wrongly, from Debian 12's own packages, into the test
# cache (${XDG_CACHE_HOME:-~/.cache}/vidfs/realvideos/); the tests that hold them (fs's
# TestCopyPropertyLoad, decode's TestConformance and TestLandingsTaken) read them there, and fail naming this script
# when they are missing. testdata/ stays small: these are a few MB each, and not ours to commit.
#
#   movie-hello.mpeg  forensics-samples-files, original-files/movie2/: MPEG-2 in a program stream
#                     whose keyframes are of one size, their places in the file often not given
#   tour.mp4          pampi, presentations/data/pampi-help/: H.264 in MP4 whose edit list ends before
#                     a P-frame its last B-frames refer to, and whose first IDR picture is damaged
#
# Run by scripts/setup.sh test; safe to run again (it does nothing once the files are there).
# Usage: testdata/real.sh [DIR]
set -euo pipefail
dir=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/vidfs/realvideos}
want=(movie-hello.mpeg tour.mp4)
# Their SHA-256, as Debian 12's packages hold them: a changed file would hold other streams than
# the tests were written for.
sums="6a7de01a1606c17b819f6548f2c89d30512a8e7528c529141409c51c3bd141a6  movie-hello.mpeg
91710dd894ba07c35dbbe7b808f67fca67e64568a1aa0b61019b47a6ee18f02a  tour.mp4"
missing=0
for f in "${want[@]}"; do [ -s "$dir/$f" ] || missing=1; done
[ "$missing" = 0 ] && (cd "$dir" && sha256sum --quiet -c - <<<"$sums" >/dev/null 2>&1) && exit 0

command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || {
  echo "real.sh: needs apt-get and dpkg-deb (Debian or Ubuntu) to fetch the real test videos" >&2; exit 1; }
mkdir -p "$dir"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
# apt-get download as the unprivileged _apt user cannot write here: fetch as whoever runs this.
fetch() { # PACKAGE: its .deb into the current directory
  apt-get download -o APT::Sandbox::User="$(id -un)" "$1" >/dev/null 2>"$tmp/err" || {
    # The package lists may not be there yet on a fresh machine.
    [ "$(id -u)" -eq 0 ] && apt-get update -q -o DPkg::Lock::Timeout=600 >/dev/null 2>&1
    apt-get download -o APT::Sandbox::User="$(id -un)" "$1" >/dev/null 2>"$tmp/err"
  } || { echo "real.sh: apt-get download $1 failed:" >&2; cat "$tmp/err" >&2; exit 1; }
}
echo "real.sh: fetching the real test videos (Debian packages forensics-samples-files, pampi) into $dir" >&2
fetch forensics-samples-files
fetch pampi
for deb in *.deb; do dpkg-deb -x "$deb" x; done
cp x/usr/share/forensics-samples/original-files/movie2/movie-hello.mpeg \
   x/usr/share/pampi/presentations/data/pampi-help/tour.mp4 "$dir/"
for f in "${want[@]}"; do [ -s "$dir/$f" ] || { echo "real.sh: $f is not in the packages any more" >&2; exit 1; }; done
(cd "$dir" && sha256sum --quiet -c - <<<"$sums") || { echo "real.sh: the files in $dir are not those the tests were written for (SHA-256 above)" >&2; exit 1; }
