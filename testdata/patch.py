#!/usr/bin/python3
"""Byte surgery on the test videos testdata/gen.sh makes, for the container quirks real datasets
have and Debian's ffmpeg CLI does not write:

  patch.py avi-compact IN OUT      AVI without its empty video chunks (the ones FFmpeg's muxer
                                   writes for an encoder's delay), as other muxers write files
  patch.py avi-declare IN OUT N    AVI whose headers declare N frames more than it holds
  patch.py mp4-matrix IN OUT A B C D
                                   MP4 whose video track's display matrix is [A B 0; C D 0; 0 0 1]
"""
import struct
import sys


def u32(d, p):
    return struct.unpack_from("<I", d, p)[0]


def avi_counts(d, delta):
    """Adds delta to the frame counts of avih and of the first (video) stream header."""
    a = d.find(b"avih")
    struct.pack_into("<I", d, a + 8 + 16, u32(d, a + 8 + 16) + delta)
    s = d.find(b"strh")
    struct.pack_into("<I", d, s + 8 + 32, u32(d, s + 8 + 32) + delta)


def avi_compact(src, dst):
    d = bytearray(open(src, "rb").read())
    movi = d.find(b"movi") - 8  # the LIST header
    end = movi + 8 + u32(d, movi + 4)
    p, kept, dropped = movi + 12, [], 0
    while p < end:
        cid, size = bytes(d[p:p + 4]), u32(d, p + 4)
        chunk = bytes(d[p:p + 8 + size + (size & 1)])
        if cid.endswith(b"dc") and size == 0:
            dropped += 1
        else:
            kept.append(chunk)
        p += 8 + size + (size & 1)
    body = b"movi" + b"".join(kept)
    idx = d.find(b"idx1", end)
    n = u32(d, idx + 4) // 16
    entries, off = [], 4
    for k in range(n):
        cid, flags, _, size = struct.unpack_from("<4sIII", d, idx + 8 + 16 * k)
        if cid.endswith(b"dc") and size == 0:
            continue
        entries.append(struct.pack("<4sIII", cid, flags, off, size))
        off += 8 + size + (size & 1)
    out = (d[:movi] + b"LIST" + struct.pack("<I", len(body)) + body +
           b"idx1" + struct.pack("<I", 16 * len(entries)) + b"".join(entries) + d[idx + 8 + 16 * n:])
    avi_counts(out, -dropped)
    struct.pack_into("<I", out, 4, len(out) - 8)
    open(dst, "wb").write(out)


def avi_declare(src, dst, extra):
    d = bytearray(open(src, "rb").read())
    avi_counts(d, extra)
    open(dst, "wb").write(d)


def mp4_matrix(src, dst, a, b, c, dd):
    d = bytearray(open(src, "rb").read())

    def boxes(start, end):
        p = start
        while p < end:
            size, kind = struct.unpack_from(">I4s", d, p)
            yield p, size, kind
            p += size
    done = False
    for p, s, k in boxes(0, len(d)):
        for q, t, kk in boxes(p + 8, p + s) if k == b"moov" else ():
            if kk != b"trak":
                continue
            tkhd = {k2: r for r, _, k2 in boxes(q + 8, q + t)}[b"tkhd"]
            width = struct.unpack_from(">I", d, tkhd + struct.unpack_from(">I", d, tkhd)[0] - 8)[0]
            if width == 0:
                continue  # not a video track
            m = tkhd + (48 if d[tkhd + 8] == 0 else 60)
            fixed = [int(v * 65536) & 0xffffffff for v in (a, b, 0, c, dd, 0, 0, 0)] + [0x40000000]
            struct.pack_into(">9I", d, m, *fixed)
            done = True
    if not done:
        sys.exit("mp4-matrix: no video track in " + src)
    open(dst, "wb").write(d)


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "avi-compact":
        avi_compact(*args)
    elif cmd == "avi-declare":
        avi_declare(args[0], args[1], int(args[2]))
    elif cmd == "mp4-matrix":
        mp4_matrix(args[0], args[1], *(float(x) for x in args[2:6]))
    else:
        sys.exit(__doc__)
