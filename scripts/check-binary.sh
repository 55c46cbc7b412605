#!/usr/bin/env bash
# Checks that a vidfs binary starts on glibc 2.31 and later with nothing else installed: its
# NEEDED libraries are within libc, libm, libdl, libpthread and the loader, no symbol needs a
# glibc newer than 2.31 (nor GLIBC_PRIVATE), it has no RPATH, and NVDEC's libraries are loaded
# at run time (dlopen), not linked. Prints what it found.   Usage: scripts/check-binary.sh BINARY
set -euo pipefail
bin=$1
max=2.31
allowed=" libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 ld-linux-x86-64.so.2 "
fail() { echo "check-binary.sh: $bin: $*" >&2; exit 1; }
command -v readelf >/dev/null || fail "readelf (binutils) is missing"

dynamic=$(readelf -d -W "$bin")
needed=$(sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p' <<<"$dynamic" | tr '\n' ' ')
for n in $needed; do
  case $allowed in *" $n "*) ;; *) fail "needs $n (NEEDED: $needed); only$allowed may stay dynamic" ;; esac
done
! grep -Eq '\((RPATH|RUNPATH)\)' <<<"$dynamic" || fail "has an RPATH or RUNPATH"
interp=$(readelf -l -W "$bin" | sed -n 's/.*Requesting program interpreter: \(.*\)\]$/\1/p')
[ "$interp" = /lib64/ld-linux-x86-64.so.2 ] || fail "its loader is '$interp', not /lib64/ld-linux-x86-64.so.2"

versions=$(readelf -V -W "$bin" | grep -o 'Name: GLIBC_[A-Z0-9._]*' | sed 's/Name: GLIBC_//' | sort -uV)
! grep -qx PRIVATE <<<"$versions" || fail "needs GLIBC_PRIVATE symbols"
highest=$(tail -n1 <<<"$versions")
[ "$(printf '%s\n' "$highest" "$max" | sort -V | tail -n1)" = "$max" ] \
  || fail "needs GLIBC_$highest ($(readelf --dyn-syms -W "$bin" | grep -o "[A-Za-z0-9_]*@GLIBC_$highest" | sort -u | tr '\n' ' ')); the limit is GLIBC_$max"
at_highest=$(readelf --dyn-syms -W "$bin" | grep -o "[A-Za-z0-9_]*@GLIBC_$highest" | sort -u | tr '\n' ' ')

for lib in libcuda.so.1 libnvcuvid.so.1; do
  grep -q "$lib" "$bin" || fail "does not name $lib: FFmpeg's NVDEC loader (ffnvcodec) is not in it"
done
echo "check-binary.sh: $bin: NEEDED: $needed; highest glibc symbol version GLIBC_$highest ($at_highest); libcuda.so.1 and libnvcuvid.so.1 loaded at run time"
