#!/usr/bin/python3
"""Per-frame codecs for the training copy, on real footage at 224x224 (issue 32).

Makes raw rgb24 frames, 224x224, from the real footage Debian's opencv-doc ships
(/usr/share/doc/opencv-doc/examples/data/Megamind.avi and vtest.avi, scaled with the ffmpeg CLI:
apt-get install -y opencv-doc ffmpeg), then measures each way of storing a frame on its own:

  none, lz4, zstd, huff  the training copy's codecs, through copystore.Store itself (BenchmarkCopyCodecs
                    in copystore/codecs_bench_test.go, go test -count 3, the median): write is Put of
                    every frame, 16 at a time, and Flush; read is a Get of each frame on its own,
                    from the page cache; bytes are the stored frames (no header or index)
  zstd+left         each row's bytes less the byte 3 before (the same channel of the pixel to the
                    left), then zstd as the store's (SpeedFastest): measured in the benchmark,
                    without the store, beside zstd-direct, plain zstd the same way
  ffv1              FFmpeg's FFV1 (-level 3 -g 1: every frame a keyframe, so each decodes on its
                    own), lossless, through the ffmpeg CLI, to Matroska (its bytes included)
  mjpeg             FFmpeg's own mjpeg encoder at -q:v 2, 3 and 5, yuvj420p and yuvj444p, lossy:
                    PSNR of its decode against the exact frames (per-byte MSE over all frames)

CPU is user+system time: for the Go rows the benchmark process's (getrusage RUSAGE_SELF), for the
ffmpeg rows the child's (RUSAGE_CHILDREN deltas), one thread (-threads 1 -filter_threads 1),
median of --repeat runs, per frame. The ffmpeg figures include converting rgb24 to and from the
codec's pixel format and the CLI's own cost (starting, reading the raw frames: the note under the
table gives that floor); a decode is timed to the null muxer, and decoded again to a file to check
it. Prints a Markdown table; --doc FILE writes it between the framecodecs markers of FILE.

Usage: /usr/bin/python3 bench/framecodecs.py [--frames 250] [--repeat 3] [--doc docs/benchmarks.md]
"""
import argparse
import json
import math
import os
import re
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

DATA = "/usr/share/doc/opencv-doc/examples/data"
VIDEOS = ["Megamind.avi", "vtest.avi"]
W = H = 224
FRAME = W * H * 3
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GO_ROWS = [("none", "none"), ("lz4", "lz4"), ("zstd", "zstd"), ("huff", "huff (colour transform, left prediction, Huffman)"), ("zstd+left", "zstd+left"),
           ("zstd-direct", "zstd (direct, beside zstd+left)")]
BEGIN, END = "<!-- framecodecs:begin -->", "<!-- framecodecs:end -->"


def ffmpeg(*args):
    return ["ffmpeg", "-v", "error", "-nostdin", "-y", *args]


def timed(cmd, **kw):
    """Runs cmd and returns (CPU s of its children, wall s)."""
    r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    subprocess.run(cmd, check=True, stdin=subprocess.DEVNULL, **kw)
    t1, r1 = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), t1 - t0


def make_frames(path, per_video):
    """Writes per_video frames of each video to path, raw rgb24 224x224; returns the counts."""
    counts = []
    with open(path, "wb") as out:
        for v in VIDEOS:
            before = out.tell()
            subprocess.run(ffmpeg("-i", os.path.join(DATA, v), "-an", "-frames:v", str(per_video),
                                  "-vf", "scale=%d:%d" % (W, H), "-pix_fmt", "rgb24", "-f", "rawvideo", "-"),
                           stdout=out, check=True)
            out.flush()
            n, rest = divmod(out.tell() - before, FRAME)
            if rest or n == 0:
                sys.exit("%s: %d bytes of frames, not a whole number of %d" % (v, out.tell() - before, FRAME))
            counts.append(n)
    return counts


def go_bench(go, raw, count):
    """Runs BenchmarkCopyCodecs count times on raw; returns {name: {metric: median}}."""
    cmd = go + ["test", "-run", "^$", "-bench", "BenchmarkCopyCodecs", "-benchtime", "1x", "-count", str(count),
                "./copystore/", "-args", "-copy.frames", raw]
    print("+ " + shlex.join(cmd), file=sys.stderr)
    out = subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.PIPE, text=True).stdout
    runs = {}
    for line in out.splitlines():
        m = re.match(r"^BenchmarkCopyCodecs/(\S+?)(?:-\d+)?\s+\d+\s+(.*)$", line)
        if not m:
            continue
        f = m.group(2).split()
        metrics = {f[i + 1]: float(f[i]) for i in range(0, len(f) - 1, 2)}
        runs.setdefault(m.group(1), []).append(metrics)
    if not runs:
        sys.exit("no benchmark results in:\n" + out)
    res = {}
    for name, ms in runs.items():
        res[name] = {k: statistics.median(x[k] for x in ms) for k in ms[0]}
        res[name]["runs"] = len(ms)
    return res


def read_raw(path):
    try:
        import numpy
        return numpy.fromfile(path, dtype=numpy.uint8)
    except ImportError:
        with open(path, "rb") as f:
            return f.read()


def psnr(a, b):
    """PSNR in dB of b against a (8-bit samples), from the per-byte MSE."""
    if len(a) != len(b):
        sys.exit("decoded %d bytes, want %d" % (len(b), len(a)))
    try:
        import numpy
        d = a.astype(numpy.int32) - b.astype(numpy.int32)
        se, n = float(numpy.dot(d, d)), len(d)
    except ImportError:
        se, n = sum((x - y) * (x - y) for x, y in zip(a, b)), len(a)
    return math.inf if se == 0 else 10 * math.log10(255 * 255 / (se / n))


def ffmpeg_rows(raw, frames, counts, tmp, repeat, qualities, pix_fmts):
    exact = read_raw(raw)
    src = ["-f", "rawvideo", "-pix_fmt", "rgb24", "-s", "%dx%d" % (W, H), "-r", "25", "-i", raw]
    one = ["-threads", "1"]
    configs = [dict(name="ffv1", label="FFV1 (-level 3 -g 1, bgr0)", ext="mkv", lossless=True,
                    enc=["-c:v", "ffv1", "-level", "3", "-g", "1"] + one)]
    for pf in pix_fmts:
        for q in qualities:
            configs.append(dict(name="mjpeg-%s-q%d" % (pf, q), label="mjpeg -q:v %d %s" % (q, pf), ext="mjpeg",
                                lossless=False, enc=["-c:v", "mjpeg", "-q:v", str(q), "-pix_fmt", pf] + one))
    rows = []
    # The floor every ffmpeg row's write pays: starting the CLI and reading the raw frames.
    floor = [timed(ffmpeg("-filter_threads", "1", *src, "-f", "null", "-")) for _ in range(repeat)]
    for c in configs:
        out = os.path.join(tmp, "%s.%s" % (c["name"], c["ext"]))
        print("+ %s" % c["label"], file=sys.stderr)
        enc = [timed(ffmpeg("-filter_threads", "1", *src, *c["enc"], out)) for _ in range(repeat)]
        dec = [timed(ffmpeg(*one, "-i", out, "-filter_threads", "1", "-pix_fmt", "rgb24", "-f", "null", "-"))
               for _ in range(repeat)]
        back = os.path.join(tmp, "back.raw")
        subprocess.run(ffmpeg(*one, "-i", out, "-pix_fmt", "rgb24", "-f", "rawvideo", back), check=True)
        got = read_raw(back)
        row = dict(name=c["name"], label=c["label"], bytes=os.path.getsize(out) / frames,
                   write_cpu=statistics.median(x[0] for x in enc) / frames,
                   read_cpu=statistics.median(x[0] for x in dec) / frames,
                   write_wall=statistics.median(x[1] for x in enc) / frames,
                   read_wall=statistics.median(x[1] for x in dec) / frames)
        if c["lossless"]:
            if len(got) != len(exact) or bytes(got) != bytes(exact):
                sys.exit("%s: the decoded frames differ from those encoded" % c["label"])
        else:
            row["psnr"] = psnr(exact, got)
            row["psnr_videos"], at = [], 0
            for n in counts:
                row["psnr_videos"].append(psnr(exact[at:at + n * FRAME], got[at:at + n * FRAME]))
                at += n * FRAME
        os.remove(back)
        rows.append(row)
    return rows, dict(cpu=statistics.median(x[0] for x in floor) / frames,
                      wall=statistics.median(x[1] for x in floor) / frames)


def machine():
    model = ""
    try:
        out = subprocess.run(["lscpu"], stdout=subprocess.PIPE, text=True).stdout
        model = next((l.split(":", 1)[1].strip() for l in out.splitlines() if l.startswith("Model name")), "")
    except OSError:
        pass
    return dict(model=model, cpus=os.cpu_count(), ffmpeg=subprocess.run(
        ["ffmpeg", "-version"], stdout=subprocess.PIPE, text=True).stdout.split(" Copyright")[0])


def render(r):
    ms = lambda s: "%.3f" % (s * 1e3)  # noqa: E731
    lines = ["| codec | bytes/frame | x of raw (150,528) | write CPU ms/frame | read CPU ms/frame | PSNR (lossy) | "
             "write wall ms/frame | read wall ms/frame |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, label in GO_ROWS:
        g = r["go"].get(name)
        if g is None:
            continue
        lines.append("| %s | %.0f | %.3f | %s | %s |  | %s | %s |" % (
            label, g["bytes/frame"], g["bytes/frame"] / FRAME, ms(g["write-cpu-ns/frame"] * 1e-9),
            ms(g["read-cpu-ns/frame"] * 1e-9), ms(g["write-ns/frame"] * 1e-9), ms(g["read-ns/frame"] * 1e-9)))
    for x in r["ffmpeg"]:
        p = ""
        if "psnr" in x:
            p = "%.2f dB (%s)" % (x["psnr"], " / ".join("%.2f" % v for v in x["psnr_videos"]))
        lines.append("| %s | %.0f | %.3f | %s | %s | %s | %s | %s |" % (
            x["label"], x["bytes"], x["bytes"] / FRAME, ms(x["write_cpu"]), ms(x["read_cpu"]), p,
            ms(x["write_wall"]), ms(x["read_wall"])))
    m = r["machine"]
    notes = [
        "",
        "%d frames, 224x224 rgb24 (%s frames of %s), on %s, %d CPUs, load average %.2f before and %.2f after "
        "(figures as measured on a busy machine); %s. Go rows: the median of %d runs of BenchmarkCopyCodecs; "
        "ffmpeg rows: the median of %d runs each." % (
            r["frames"], " and ".join(str(n) for n in r["counts"]), " and ".join(VIDEOS), m["model"], m["cpus"],
            r["load"][0], r["load"][1], m["ffmpeg"], r["count"], r["repeat"]),
        "",
        "none, lz4, zstd and huff go through copystore.Store (write: Put 16 frames at a time and Flush; read: a Get of each "
        "frame alone, from the page cache; bytes: the stored frames, not the file's header and index); its writer "
        "runs at nice 10. zstd+left (each byte less the byte 3 before it in its row, then zstd as the store's) and "
        "zstd (direct) are the codec alone, no file. The ffmpeg rows go through the CLI, one thread, and include "
        "the conversion from and to rgb24 and the CLI's own cost: starting it and reading the raw frames to the "
        "null muxer takes %s ms of CPU per frame. FFV1 is lossless (checked byte for byte); PSNR is over all "
        "frames' bytes (in brackets: %s)." % (ms(r["floor"]["cpu"]), " / ".join(VIDEOS)),
        "",
        "What vidfs offers (--cache-disk-codec, with --cache-keep copy): none (the default), lz4, zstd and huff. "
        "huff is the lossless choice for disk (0.44x, against FFV1's 0.33x at 7x its read CPU a frame); JPEG "
        "(lossy) is not offered: FFmpeg's mjpeg encoder is not in vidfs's FFmpeg build, and its 38 dB at -q:v 2 "
        "(4:2:0) holds on Megamind.avi but not on vtest.avi.",
    ]
    return "\n".join(lines + notes)


def write_doc(doc, table, cmd):
    text = open(doc).read()
    if BEGIN not in text or END not in text:
        print("%s has no %s ... %s markers: not written" % (doc, BEGIN, END), file=sys.stderr)
        return
    section = "%s\n## Per-frame codecs for the training copy (issue 32, bench/framecodecs.py)\n\n`%s`\n\n%s\n%s" % (
        BEGIN, cmd, table, END)
    pat = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    open(doc, "w").write(pat.sub(lambda _: section, text, count=1))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=int, default=250, help="frames of each video (default 250)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each ffmpeg encode and decode (median)")
    ap.add_argument("--count", type=int, default=3, help="go test -count for BenchmarkCopyCodecs (median)")
    ap.add_argument("--qualities", default="2,3,5", help="mjpeg -q:v values (default 2,3,5)")
    ap.add_argument("--pix-fmts", default="yuvj420p,yuvj444p", help="mjpeg pixel formats")
    ap.add_argument("--go", default=shutil.which("go") or "/usr/local/go/bin/go",
                    help="the go command (copystore needs no FFmpeg; 'scripts/with-ffmpeg go' works too)")
    ap.add_argument("--json", help="also save the results here")
    ap.add_argument("--from", dest="from_", help="render saved results (--json) instead of measuring")
    ap.add_argument("--doc", help="write the table between the framecodecs markers of this file")
    a = ap.parse_args()
    cmd = "/usr/bin/python3 bench/framecodecs.py " + shlex.join(sys.argv[1:])
    if a.from_:
        r = json.load(open(a.from_))
    else:
        missing = [p for p in [os.path.join(DATA, v) for v in VIDEOS] if not os.path.exists(p)]
        if missing or not shutil.which("ffmpeg"):
            sys.exit("needs ffmpeg and %s: apt-get install -y opencv-doc ffmpeg" % ", ".join(missing or ["ffmpeg"]))
        load0 = os.getloadavg()[0]
        with tempfile.TemporaryDirectory(prefix="framecodecs-") as tmp:
            raw = os.path.join(tmp, "frames.raw")
            counts = make_frames(raw, a.frames)
            frames = sum(counts)
            go = go_bench(shlex.split(a.go), raw, a.count)
            rows, floor = ffmpeg_rows(raw, frames, counts, tmp, a.repeat, [int(q) for q in a.qualities.split(",")],
                                      a.pix_fmts.split(","))
        r = dict(frames=frames, counts=counts, go=go, ffmpeg=rows, floor=floor, count=a.count, repeat=a.repeat,
                 load=[load0, os.getloadavg()[0]], machine=machine(), command=cmd)
        if a.json:
            json.dump(r, open(a.json, "w"), indent=1)
    table = render(r)
    print(table)
    if a.doc:
        write_doc(a.doc, table, r.get("command", cmd))


if __name__ == "__main__":
    main()
