#!/usr/bin/python3
"""Byte surgery on the test videos testdata/gen.sh makes, for the container quirks real datasets
have and Debian's ffmpeg CLI does not write:

  patch.py avi-compact IN OUT      AVI without its empty video chunks (the ones FFmpeg's muxer
                                   writes for an encoder's delay), as other muxers write files
  patch.py avi-declare IN OUT N    AVI whose headers declare N frames more than it holds
  patch.py mp4-matrix IN OUT A B C D
                                   MP4 whose video track's display matrix is [A B 0; C D 0; 0 0 1]
  patch.py mp4-no-reorder IN OUT   H.264 MP4 whose SPS (in avcC) does not say how many frames the
                                   decoder reorders (no VUI bitstream_restriction), as many phones
                                   and cameras write it
  patch.py mp4-edit-end IN OUT N   MP4 whose edit list ends N frames (of its first sample's
                                   duration) before its media does, as editors that trim a clip
                                   without re-encoding write it: the frames cut off are still
                                   in the file, and frames shown may refer to them
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


class Bits:
    """Reads an H.264 RBSP bit by bit, and copies what it reads."""

    def __init__(self, rbsp):
        self.bits = "".join(f"{b:08b}" for b in rbsp)
        self.pos = 0

    def u(self, n):
        v = int(self.bits[self.pos:self.pos + n], 2)
        self.pos += n
        return v

    def ue(self):
        zeros = 0
        while self.bits[self.pos + zeros] == "0":
            zeros += 1
        v = self.u(2 * zeros + 1) - 1
        return v


def unescape(nal):
    out, zeros = bytearray(), 0
    for b in nal:
        if zeros >= 2 and b == 3:
            zeros = 0
            continue
        out.append(b)
        zeros = zeros + 1 if b == 0 else 0
    return bytes(out)


def escape(rbsp):
    out, zeros = bytearray(), 0
    for b in rbsp:
        if zeros >= 2 and b <= 3:
            out.append(3)
            zeros = 0
        out.append(b)
        zeros = zeros + 1 if b == 0 else 0
    return bytes(out)


def sps_without_reorder(nal):
    """The SPS NAL with its VUI cut before bitstream_restriction_flag, which is set to 0."""
    r = Bits(unescape(nal[1:]))
    profile = r.u(8)
    r.u(16)  # constraint flags, level
    r.ue()   # seq_parameter_set_id
    if profile in (100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135):
        if r.ue() == 3:  # chroma_format_idc
            r.u(1)
        r.ue(), r.ue(), r.u(1)  # bit depths, qpprime_y_zero_transform_bypass
        assert r.u(1) == 0, "scaling matrices are not handled"
    r.ue()  # log2_max_frame_num
    assert r.ue() == 0, "only pic_order_cnt_type 0 is handled"
    r.ue()  # log2_max_pic_order_cnt_lsb
    r.ue(), r.u(1), r.ue(), r.ue()  # max_num_ref_frames, gaps, width, height in macroblocks
    if r.u(1) == 0:  # frame_mbs_only_flag
        r.u(1)
    r.u(1)  # direct_8x8_inference
    if r.u(1):  # frame_cropping
        r.ue(), r.ue(), r.ue(), r.ue()
    assert r.u(1) == 1, "the SPS has no VUI"
    if r.u(1) and r.u(8) == 255:  # aspect_ratio_info
        r.u(32)
    if r.u(1):  # overscan_info
        r.u(1)
    if r.u(1):  # video_signal_type
        r.u(4)
        if r.u(1):
            r.u(24)
    if r.u(1):  # chroma_loc_info
        r.ue(), r.ue()
    if r.u(1):  # timing_info
        r.u(65)
    assert r.u(1) == 0 and r.u(1) == 0, "HRD parameters are not handled"
    r.u(1)  # pic_struct_present
    assert r.bits[r.pos] == "1", "the SPS has no bitstream_restriction"
    bits = r.bits[:r.pos] + "0" + "1"  # bitstream_restriction_flag, rbsp_stop_one_bit
    bits += "0" * (-len(bits) % 8)
    return nal[:1] + escape(int(bits, 2).to_bytes(len(bits) // 8, "big"))


def mp4_no_reorder(src, dst):
    d = bytearray(open(src, "rb").read())
    a = d.find(b"avcC")
    assert a > 0 and d.find(b"avcC", a + 1) < 0, "want one avcC box"
    assert d[a + 9] & 0x1f == 1, "want one SPS"
    n = struct.unpack_from(">H", d, a + 10)[0]
    sps = bytes(d[a + 12:a + 12 + n])
    new = sps_without_reorder(sps)
    assert len(new) <= n
    # Same length, so that no box moves: H.264 parsers drop the zero bytes after the stop bit.
    d[a + 12:a + 12 + n] = new + bytes(n - len(new))
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


def mp4_edit_end(src, dst, n):
    d = bytearray(open(src, "rb").read())
    mvhd = d.find(b"mvhd")
    assert d[mvhd + 4] == 0, "want a version 0 mvhd"
    movie_scale = struct.unpack_from(">I", d, mvhd + 16)[0]
    stts = d.find(b"stts")
    assert stts > 0 and d.find(b"stts", stts + 1) < 0, "want one track"
    media_scale = struct.unpack_from(">I", d, d.find(b"mdhd") + 16)[0]
    delta = struct.unpack_from(">I", d, stts + 16)[0]  # the first entry's sample duration
    elst = d.find(b"elst")
    assert elst > 0 and d[elst + 4] == 0, "want a version 0 edit list"
    dur = struct.unpack_from(">I", d, elst + 12)[0]
    cut = n * delta * movie_scale // media_scale
    struct.pack_into(">I", d, elst + 12, dur - cut)
    open(dst, "wb").write(d)


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "avi-compact":
        avi_compact(*args)
    elif cmd == "avi-declare":
        avi_declare(args[0], args[1], int(args[2]))
    elif cmd == "mp4-matrix":
        mp4_matrix(args[0], args[1], *(float(x) for x in args[2:6]))
    elif cmd == "mp4-no-reorder":
        mp4_no_reorder(*args)
    elif cmd == "mp4-edit-end":
        mp4_edit_end(args[0], args[1], int(args[2]))
    else:
        sys.exit(__doc__)
