#!/usr/bin/python3
"""Exact decoding through a mount against PyAV, clips per CPU second (issue 48).

Data: bench/dataset10.sh's 24 H.264 videos at 480p (GOP 48, 3 B-frames; cached in
~/.cache/vidfs/bench). Each round, taking turns (the contenders in one order in even rounds, in
the reverse order in odd ones):

  vidfs  a fresh `bin/vidfs mount DATA MNT --frames 16 --stride 2 --size 224x224 --resize stretch
         --workers 1` (probe tables from a probe cache that a first, uncounted mount made); one
         reader reads N samples drawn at random (the round's seed) through clips.raw with pread, in
         that order, no plan written: every read is a decode. CPU: user+system time of the mount
         and of its decoder helpers (its children, counted live from /proc, and once reaped in the
         mount's cutime), from when the mount is up to when the last read returns (startup and
         unmount not counted; the ratio counting the mount's whole life, from wait4, is printed
         too).
  PyAV   python3-av (Debian's PyAV 10 on FFmpeg 5.1), one thread (thread_type NONE, thread_count
         1), the same N clips in the same order, as a typical Dataset does: open the file, seek to
         the keyframe at or before the clip's first frame, decode forward, keep frames start,
         start+2, ..., start+30 (matched by timestamp), each converted with
         to_ndarray(width=224, height=224, format="rgb24") (stretch, swscale's bilinear); its own
         process's CPU from before the first clip to after the last (interpreter start and
         imports not counted).

Before the timed rounds, round 0's clips are checked to hold the same frames: each frame vidfs
serves is compared (PSNR) with PyAV's frames start+2j-1, start+2j and start+2j+1 of the same clip,
and must be closest to its own, or the run stops.

Prints each round's figures (stderr), then a Markdown table of clips per CPU second and CPU per
clip (median, min-max), and the ratios round by round, with the CPU model. --fast adds a mount with
--decode fast to the turns; --also NAME=BIN another vidfs binary (the one before a change), and
--fast-also its --decode fast.
Usage: bench/pyav_mount.py [--rounds 5] [--clips 60] [--fast] [--also before=/path/to/vidfs]
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from run import machine  # noqa: E402

CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "vidfs", "bench")
FRAMES, STRIDE, W, H = 16, 2, 224, 224
SPEC = ["--frames", str(FRAMES), "--stride", str(STRIDE), "--size", "%dx%d" % (W, H), "--resize", "stretch",
        "--workers", "1"]
BIN = os.path.join(ROOT, "bin", "vidfs")
TICK = os.sysconf("SC_CLK_TCK")

# The PyAV side, run in a process of its own: reads {"w", "h", "clips": [[path, [pts, ...]], ...]}
# (and "dump": a directory) on stdin, decodes the clips, prints {"cpu", "wall", "decoded"}. With
# dump, it writes each clip's frames there instead (every frame from the first wanted to the last,
# for the identity check).
PYAV = r'''
import json, os, sys, time
import av
import numpy as np

def clip(path, pts, w, h, every):
    with av.open(path) as c:
        s = c.streams.video[0]
        s.thread_type = "NONE"
        s.codec_context.thread_count = 1
        c.seek(pts[0], stream=s, backward=True, any_frame=False)
        wanted, out, n, last = set(pts), {}, 0, pts[-1]
        for f in c.decode(s):
            n += 1
            if f.pts in wanted or (every and f.pts is not None and pts[0] <= f.pts <= last):
                out[f.pts] = f.to_ndarray(width=w, height=h, format="rgb24")
            if f.pts is not None and f.pts >= last:
                break
        if not wanted <= out.keys():
            raise SystemExit("%s: got %d of %d frames for the clip at pts %d" % (path, len(wanted & out.keys()), len(pts), pts[0]))
        return out, n

job = json.load(sys.stdin)
w, h, dump = job["w"], job["h"], job.get("dump")
cpu, wall, decoded = time.process_time(), time.perf_counter(), 0
for k, (path, pts) in enumerate(job["clips"]):
    out, n = clip(path, pts, w, h, dump is not None)
    decoded += n
    if dump:
        np.save(os.path.join(dump, "%d.npy" % k), np.stack([out[p] for p in sorted(out)]))
print(json.dumps({"cpu": time.process_time() - cpu, "wall": time.perf_counter() - wall, "decoded": decoded}))
'''


def proc_cpu(pid):
    """CPU seconds of pid (all its threads), and of its reaped children, from /proc/PID/stat."""
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TICK, (int(f[13]) + int(f[14])) / TICK


def children(pid):
    kids = []
    for task in os.listdir("/proc/%d/task" % pid):
        try:
            kids += map(int, open("/proc/%d/task/%s/children" % (pid, task)).read().split())
        except OSError:
            pass
    return kids


def tree_cpu(pid):
    """CPU seconds of the mount, its live children (the decoder helpers) and its reaped ones."""
    own, reaped = proc_cpu(pid)
    live = 0.0
    for k in children(pid):
        try:
            live += sum(proc_cpu(k))
        except OSError:  # gone since listed: counted in reaped once waited for
            pass
    return own + reaped + live


class Mount:
    def __init__(self, binary, data, probe, tmp, extra):
        self.bin = binary
        self.dir = tempfile.mkdtemp(dir=tmp)
        self.log = open(os.path.join(tmp, "mount.log"), "a")
        self.proc = subprocess.Popen([binary, "mount", data, self.dir, *SPEC, "--probe-cache", probe, *extra],
                                     stdout=self.log, stderr=self.log)
        for _ in range(6000):
            if os.path.exists(os.path.join(self.dir, ".vidfs", "stats")):
                return
            if self.proc.poll() is not None:
                raise SystemExit("vidfs mount exited: see " + self.log.name)
            time.sleep(0.01)
        raise SystemExit("vidfs mount did not come up")

    def stats(self):
        return json.load(open(os.path.join(self.dir, ".vidfs", "stats")))

    def close(self):
        """Unmounts; returns the CPU seconds of the mount and its reaped children over its whole life."""
        subprocess.run([self.bin, "umount", self.dir], check=True, capture_output=True)
        _, status, ru = os.wait4(self.proc.pid, 0)
        self.proc.returncode = status
        self.log.close()
        os.rmdir(self.dir)
        return ru.ru_utime + ru.ru_stime


def read_samples(mnt, samples, size, keep=None):
    fd = os.open(os.path.join(mnt, "clips.raw"), os.O_RDONLY)
    try:
        for i in samples:
            b = os.pread(fd, size, i * size)
            if len(b) != size:
                raise SystemExit("sample %d: read %d of %d bytes" % (i, len(b), size))
            if keep is not None:
                keep.append(b)
    finally:
        os.close(fd)


def run_vidfs(binary, data, probe, tmp, samples, extra, keep=None):
    m = Mount(binary, data, probe, tmp, extra)
    st = m.stats()
    time.sleep(0.2)  # the helpers started and said hello
    cpu0, t0 = tree_cpu(m.proc.pid), time.monotonic()
    read_samples(m.dir, samples, st["sample_bytes"], keep)
    wall, cpu = time.monotonic() - t0, tree_cpu(m.proc.pid) - cpu0
    d = m.stats()["decode"]
    whole = m.close()
    if d["clips"] != len(samples) or d["failed"]:
        raise SystemExit("vidfs decoded %d clips (%d failed) for %d reads" % (d["clips"], d["failed"], len(samples)))
    return {"cpu": cpu, "wall": wall, "whole": whole, "decoded": d["frames_decoded"]}


def run_pyav(clips, dump=None):
    job = {"w": W, "h": H, "clips": clips}
    if dump:
        job["dump"] = dump
    out = subprocess.run(["/usr/bin/python3", "-c", PYAV], input=json.dumps(job), capture_output=True, text=True)
    if out.returncode:
        raise SystemExit("PyAV side failed: " + out.stderr[-2000:])
    return json.loads(out.stdout)


def video_pts(path):
    """Every frame's pts in presentation order (what vidfs's frame numbers count)."""
    import av
    with av.open(path) as c:
        s = c.streams.video[0]
        return sorted(p.pts for p in c.demux(s) if p.pts is not None)


def index_rows(mnt):
    import csv
    return [(r["video"], int(r["start"])) for r in csv.DictReader(open(os.path.join(mnt, "index.csv")))]


def psnr(a, b):
    import numpy as np
    se = ((a.astype(np.float64) - b.astype(np.float64)) ** 2).mean()
    return float("inf") if se == 0 else 10 * np.log10(255 * 255 / se)


def check_frames(binary, data, probe, tmp, samples, clips, extra):
    """Round 0's clips: every frame vidfs serves is, of PyAV's frames around it, closest to its own.
    Returns the lowest PSNR against its own, and the least margin (dB) over a neighbour's."""
    import numpy as np
    served = []
    run_vidfs(binary, data, probe, tmp, samples, extra, keep=served)
    dump = tempfile.mkdtemp(dir=tmp)
    run_pyav(clips, dump)
    worst, margin = float("inf"), float("inf")
    for k, b in enumerate(served):
        v = np.frombuffer(b, np.uint8).reshape(FRAMES, H, W, 3)
        p = np.load(os.path.join(dump, "%d.npy" % k))  # frames start .. start+30, all of them
        for j in range(FRAMES):
            own = psnr(v[j], p[STRIDE * j])
            others = [psnr(v[j], p[STRIDE * j + d]) for d in (-1, 1) if 0 <= STRIDE * j + d < len(p)]
            if others and max(others) >= own:
                raise SystemExit("clip %d frame %d: vidfs's frame is %.1f dB from PyAV's same frame, %.1f dB from a neighbour"
                                 % (k, j, own, max(others)))
            worst, margin = min(worst, own), min([margin] + [own - o for o in others])
    return worst, margin


def rng(xs, fmt):
    return (fmt + " (" + fmt + "-" + fmt + ")") % (statistics.median(xs), min(xs), max(xs))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--clips", type=int, default=60, help="samples read a round")
    ap.add_argument("--fast", action="store_true", help="also a mount with --decode fast, in the same turns")
    ap.add_argument("--decoders", default="isolated", help="the mounts' --decoders")
    ap.add_argument("--bin", default=BIN, help="the vidfs binary to measure (default bin/vidfs)")
    ap.add_argument("--also", action="append", default=[], metavar="NAME=BIN",
                    help="another vidfs binary (the one before a change) in the same turns; repeatable")
    ap.add_argument("--fast-also", action="store_true", help="--decode fast of each --also binary too")
    ap.add_argument("--no-check", action="store_true", help="skip the frame identity check")
    a = ap.parse_args()
    binary = os.path.abspath(a.bin)
    began = time.time()
    data = os.path.join(CACHE, "dataset10-480p")
    subprocess.run([os.path.join(HERE, "dataset10.sh"), data, "480"], check=True)
    extra = ["--decoders", a.decoders]
    # (name, binary or None for PyAV, the mount's extra flags)
    sides = [("vidfs", binary, extra), ("pyav", None, None)]
    if a.fast:
        sides.append(("vidfs-fast", binary, extra + ["--decode", "fast"]))
    for item in a.also:
        name, _, path = item.partition("=")
        sides.append((name, os.path.abspath(path), extra))
        if a.fast_also:
            sides.append((name + "-fast", os.path.abspath(path), extra + ["--decode", "fast"]))
    with tempfile.TemporaryDirectory() as tmp:
        probe = os.path.join(tmp, "probe")
        m = Mount(binary, data, probe, tmp, extra)  # fills the probe cache; not counted
        rows = index_rows(m.dir)
        m.close()
        pts, plans = {}, []
        for k in range(a.rounds):
            samples = random.Random(k).sample(range(len(rows)), min(a.clips, len(rows)))
            clips = []
            for i in samples:
                video, start = rows[i]
                path = os.path.join(data, video)
                if path not in pts:
                    pts[path] = video_pts(path)
                clips.append([path, pts[path][start:start + STRIDE * (FRAMES - 1) + 1:STRIDE]])
            plans.append((samples, clips))
        lines = ["Machine: " + machine(), ""]
        if not a.no_check:
            own, margin = check_frames(binary, data, probe, tmp, plans[0][0], plans[0][1], extra)
            lines += ["Frames checked (round 0's %d clips, %d frames): each frame vidfs serves is closest to PyAV's same "
                      "frame (at least %.1f dB), by at least %.1f dB over PyAV's frames before and after it"
                      % (len(plans[0][0]), FRAMES * len(plans[0][0]), own, margin), ""]
        res = {name: [] for name, _, _ in sides}
        for k, (samples, clips) in enumerate(plans):
            for name, b, ex in (sides if k % 2 == 0 else sides[::-1]):
                if b is None:
                    r = run_pyav(clips)
                else:
                    r = run_vidfs(b, data, probe, tmp, samples, ex)
                r["cps"] = len(samples) / r["cpu"]
                res[name].append(r)
                print("round %d %s: %.1f clips/CPU s, %.1f ms CPU/clip, %.1f frames decoded/clip%s" % (
                    k, name, r["cps"], 1000 * r["cpu"] / len(samples), r["decoded"] / len(samples),
                    ", whole mount %.1f ms/clip" % (1000 * r["whole"] / len(samples)) if "whole" in r else ""),
                    file=sys.stderr)
        n = len(plans[0][0])
        lines += ["| %d clips a round, %d rounds | clips per CPU s | CPU ms per clip | frames decoded per clip |" % (n, a.rounds),
                  "|---|---:|---:|---:|"]
        for name, _, _ in sides:
            rs = res[name]
            lines.append("| %s | %s | %s | %.1f |" % (name, rng([r["cps"] for r in rs], "%.1f"),
                                                     rng([1000 * r["cpu"] / n for r in rs], "%.1f"),
                                                     statistics.median(r["decoded"] / n for r in rs)))
        lines.append("")

        def ratio(x, y, whole=False):
            """x's clips per CPU second over y's, round by round."""
            return [(n / p["whole"] if whole else p["cps"]) / q["cps"] for p, q in zip(res[x], res[y])]
        for name, b, _ in sides:
            if b is not None:
                r = ratio(name, "pyav")
                lines.append("%s / PyAV: %s, rounds %s; counting the mount's whole life (start to exit): %s" % (
                    name, rng(r, "%.2fx"), " ".join("%.2f" % x for x in r), rng(ratio(name, "pyav", True), "%.2fx")))
        for name, _, _ in sides:
            if name.endswith("-fast"):
                lines.append("%s / %s: %s" % (name, name[:-5], rng(ratio(name, name[:-5]), "%.2fx")))
        for item in a.also:
            name = item.partition("=")[0]
            lines.append("vidfs / %s: %s" % (name, rng(ratio("vidfs", name), "%.2fx")))
        lines += ["", "%d rounds, %.0f s" % (a.rounds, time.time() - began)]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
