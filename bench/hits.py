#!/usr/bin/python3
"""One reader's hit costs: a single process reads whole samples of clips.raw with pread, in plan
order (a shuffled permutation, written to .vidfs/order first), on make bench's dataset. Part of
make bench (bench/beyond.py); by itself:

    bench/hits.py [--rounds R] [--codecs none,lz4,zstd] [--out FILE.json]

Kinds, taking turns in every round, each on a fresh mount:
- memory: a memory cache of 2 GiB that holds every sample, read once first (decoded then);
- tmpfs: the same bytes in a file in /dev/shm: pread from the page cache, the ceiling;
- tier CODEC: a memory cache of 64 MiB over a disk tier that holds every sample, written with
  CODEC by an earlier mount (so its files are in the page cache): the plan loads samples from the
  tier into memory ahead of the reader; then the same again on that mount (a later epoch: with
  none, whose entries a mount checks once, the second read trusts them);
- with --max-pages N (root, Linux 6.13+), memory again on a mount made while
  /proc/sys/fs/fuse/max_pages_limit was N (put back as soon as the mount is up): FUSE requests
  as large as a sample instead of 1 MiB.
Before the rounds, each codec's tier is written by a mount that reads every sample once in plan
order (epoch 1: decodes and writes the tier), and so is a mount without a tier, for comparison.
Prints JSON: for each kind, per round, clips/s, the reader's CPU ms per clip and vidfs's CPU ms
per clip; for each codec, epoch 1's clips/s and vidfs CPU ms per clip, and disk bytes per sample.
"""
import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run  # noqa: E402  (make bench's helpers: the mount, the dataset)

CODECS = ["none", "lz4", "zstd"]
MAX_PAGES = "/proc/sys/fs/fuse/max_pages_limit"


class MaxPages:
    """The kernel's limit on FUSE request pages set to n while the with block runs (n: None, as
    it is)."""

    def __init__(self, n):
        self.n = n

    def __enter__(self):
        if self.n:
            self.old = open(MAX_PAGES).read().strip()
            open(MAX_PAGES, "w").write(str(self.n))

    def __exit__(self, *exc):
        if self.n:
            open(MAX_PAGES, "w").write(self.old)


def max_pages_settable():
    return os.path.exists(MAX_PAGES) and os.access(MAX_PAGES, os.W_OK)
TICK = os.sysconf("SC_CLK_TCK")


def cpu_ms(pid):
    """CPU time of process pid, all its threads (those ended too), in ms."""
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) * 1000.0 / TICK


def stats(mnt):
    return json.load(open(os.path.join(mnt, ".vidfs", "stats")))


def write_plan(mnt, order):
    with open(os.path.join(mnt, ".vidfs", "order"), "w") as f:
        f.write("\n".join(map(str, order)) + "\n")


def read(path, order, size, pid=0):
    """Reads the samples of order whole from path; returns clips/s, reader CPU ms and pid's CPU ms
    per clip."""
    buf = bytearray(size)
    mv = memoryview(buf)
    fd = os.open(path, os.O_RDONLY)
    v0 = cpu_ms(pid) if pid else 0.0
    c0, t0 = time.process_time(), time.perf_counter()
    for i in order:
        got = 0
        while got < size:
            n = os.preadv(fd, [mv[got:]], i * size + got)
            if n <= 0:
                raise SystemExit("short read of sample %d" % i)
            got += n
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    v = cpu_ms(pid) - v0 if pid else 0.0
    os.close(fd)
    n = len(order)
    return {"clips_per_s": n / wall, "reader_cpu_ms": 1000 * cpu / n, "vidfs_cpu_ms": v / n}


def fill_tier(source, tdir, codec, order, size):
    """Epoch 1 of a mount with a tier in tdir written with codec (or no tier): returns its figures,
    after reading again until the tier holds every sample."""
    extra = ["--cache-mem", "64MiB"]
    if codec:
        extra += ["--cache-dir", tdir, "--cache-disk", "8GiB", "--cache-keep", "samples", "--cache-disk-codec", codec]
    with run.Mounted(source, extra, name="mnt-hits") as m:
        write_plan(m.dir, order)
        r = read(os.path.join(m.dir, "clips.raw"), order, size, m.proc.pid)
        if codec:
            for _ in range(3):
                while stats(m.dir)["tier"]["backlog"]:
                    time.sleep(0.2)
                t = stats(m.dir)["tier"]
                if t["entries"] >= len(order):
                    break
                read(os.path.join(m.dir, "clips.raw"), order, size)
            t = stats(m.dir)["tier"]
            r["disk_bytes_per_sample"] = t["used_bytes"] / max(t["entries"], 1)
            r["entries"] = t["entries"]
    return r


def memory_round(source, order, size, shm, max_pages=None):
    """A mount whose 2 GiB cache holds every sample: read once (decoded), then measured."""
    with MaxPages(max_pages):
        m = run.Mounted(source, ["--cache-mem", "2GiB"], name="mnt-hits").__enter__()
    try:
        write_plan(m.dir, order)
        path = os.path.join(m.dir, "clips.raw")
        read(path, order, size)  # decodes every sample into the cache
        if shm and not os.path.exists(shm):
            shutil.copyfile(path, shm)
        res = read(path, order, size, m.proc.pid)
        res["hit_rate"] = stats(m.dir)["cache"]["hit_rate"]
        return res
    finally:
        m.__exit__(None, None, None)


def measure(source, rounds, codecs, max_pages=None):
    with run.Mounted(source, ["--cache-mem", "2GiB"], name="mnt-hits") as m:
        lay = json.load(open(os.path.join(m.dir, ".vidfs", "layout.json")))
    n, size = lay["samples"], lay["sample_bytes"]
    rnd = random.Random(11)
    order = list(range(n))
    rnd.shuffle(order)
    out = {"samples": n, "sample_bytes": size, "rounds": rounds, "epoch1": {}, "kinds": {}}
    tiers = {}
    shm = "/dev/shm/vidfs-hits.raw"
    try:
        run.log("hits: epoch 1 without a tier, and writing a tier with each codec")
        out["epoch1"]["no tier"] = fill_tier(source, None, None, order, size)
        for c in codecs:
            tiers[c] = tempfile.mkdtemp(prefix="vidfs-hits-%s-" % c, dir=run.CACHE)
            out["epoch1"][c] = fill_tier(source, tiers[c], c, order, size)
            run.log("  epoch 1, tier %s: %.1f clips/s, vidfs %.1f ms CPU per clip, %.2f MB per sample on disk" % (
                c, out["epoch1"][c]["clips_per_s"], out["epoch1"][c]["vidfs_cpu_ms"], out["epoch1"][c]["disk_bytes_per_sample"] / 1e6))
        kinds = ["memory", "tmpfs"] + ["tier " + c for c in codecs] + (["memory, max_pages %d" % max_pages] if max_pages else [])
        out["max_pages"] = max_pages
        for k in kinds:
            out["kinds"][k] = []
        for r in range(rounds):
            rnd.shuffle(order)
            for k in kinds if r % 2 == 0 else kinds[::-1]:
                if k == "memory":
                    res = memory_round(source, order, size, shm)
                elif k.startswith("memory, max_pages"):
                    res = memory_round(source, order, size, None, max_pages)
                elif k == "tmpfs":
                    res = read(shm, order, size)  # made by the first round's memory run, which comes before
                else:
                    c = k.split()[1]
                    with run.Mounted(source, ["--cache-mem", "64MiB", "--cache-dir", tiers[c], "--cache-disk", "8GiB",
                                              "--cache-keep", "samples", "--cache-disk-codec", c], name="mnt-hits") as m:
                        write_plan(m.dir, order)
                        res = read(os.path.join(m.dir, "clips.raw"), order, size, m.proc.pid)
                        st = stats(m.dir)
                        res["hit_rate"], res["tier_hits"], res["decoded"] = st["cache"]["hit_rate"], st["tier"]["hits"], st["decode"]["clips"]
                        # Again, in the same mount: a later epoch, whose entries were checked once.
                        write_plan(m.dir, order)
                        again = read(os.path.join(m.dir, "clips.raw"), order, size, m.proc.pid)
                        out["kinds"].setdefault(k + ", again", []).append(again)
                out["kinds"][k].append(res)
                run.log("  round %d %-10s %7.1f clips/s, reader %.2f ms, vidfs %.2f ms CPU per clip%s" % (
                    r + 1, k, res["clips_per_s"], res["reader_cpu_ms"], res["vidfs_cpu_ms"],
                    ", memory hits %.0f %%" % (100 * res["hit_rate"]) if "hit_rate" in res else ""))
    finally:
        for d in tiers.values():
            shutil.rmtree(d, ignore_errors=True)
        if os.path.exists(shm):
            os.remove(shm)
    return out


def rng(v, fmt="%.2f"):
    return (fmt + " (" + fmt + "-" + fmt + ")") % (statistics.median(v), min(v), max(v))


def ratios(a, b):
    """a/b round by round (the rounds of each kind were taken in turns)."""
    return [x / y for x, y in zip(a, b)]


def section(h):
    """Markdown for docs/benchmarks.md, and the goals."""
    K = h["kinds"]
    col = lambda k, f: [r[f] for r in K[k]]
    codecs = [k.split()[1] for k in K if k.startswith("tier ") and not k.endswith(", again")]
    L = ["One process reads every sample (%d of %.1f MB) whole with `pread` in plan order, nothing else running; "
         "each kind on a fresh mount, taking turns, %d rounds (`bench/hits.py`). Median (range) over rounds; CPU in ms"
         " per sample." % (h["samples"], h["sample_bytes"] / 1e6, h["rounds"]), "",
         "| hits | clips/s | GB/s | vidfs CPU per clip | reader CPU per clip |", "|---|---:|---:|---:|---:|"]
    mp = "memory, max_pages %d" % h["max_pages"] if h.get("max_pages") else None
    tiers = [k for c in codecs for k in ("tier " + c, "tier %s, again" % c) if k in K]
    for k in ["memory"] + ([mp] if mp else []) + tiers + ["tmpfs"]:
        name = {"memory": "memory cache (2 GiB, every sample in it)", "tmpfs": "tmpfs, the same bytes (pread from the page cache)",
                mp: "memory cache, FUSE requests of a whole sample (`%s` at %s while mounting)" % (MAX_PAGES, h.get("max_pages"))}.get(
            k, "disk tier, %s (memory cache 64 MiB; the tier prefetched into it)" % k[5:])
        if k.endswith(", again"):
            name = "disk tier, %s, read again on the same mount (a later epoch)" % k[5:-7]
        gb = [c * h["sample_bytes"] / 1e9 for c in col(k, "clips_per_s")]
        L.append("| %s | %s | %s | %s | %s |" % (name, rng(col(k, "clips_per_s"), "%.0f"), rng(gb, "%.1f"),
                                                 rng(col(k, "vidfs_cpu_ms")) if k != "tmpfs" else "-", rng(col(k, "reader_cpu_ms"))))
    L += ["", "Epoch 1 of each (the same reader, a fresh tier: every sample decoded, and written to the tier in the background):", "",
          "| tier | disk per sample | epoch 1 clips/s | vidfs CPU per clip |", "|---|---:|---:|---:|"]
    for c in ["no tier"] + codecs:
        e = h["epoch1"][c]
        L.append("| %s | %s | %.1f | %.1f ms |" % (c, "%.2f MB" % (e["disk_bytes_per_sample"] / 1e6) if c != "no tier" else "-",
                                                  e["clips_per_s"], e["vidfs_cpu_ms"]))
    mem_cpu = col("memory", "vidfs_cpu_ms")
    goals = []
    for c in codecs:
        x = ratios(col("tier " + c, "vidfs_cpu_ms"), mem_cpu)
        goals.append("- A tier hit (%s) costs %sx the vidfs CPU of a memory hit (goal: at most 1.5x: %s)." % (
            c, rng(x), verdict(x, 1.5, below=True)))
        if "tier %s, again" % c in K:
            x = ratios(col("tier %s, again" % c, "vidfs_cpu_ms"), mem_cpu)
            goals.append("  Read again on the same mount (a later epoch): %sx (%s)." % (rng(x), verdict(x, 1.5, below=True)))
    x = ratios(col("memory", "clips_per_s"), col("tmpfs", "clips_per_s"))
    goals.append("- Memory hits reach %sx the clips/s of tmpfs (goal: at least 0.8x: %s)." % (rng(x), verdict(x, 0.8)))
    if mp:
        x = ratios(col(mp, "clips_per_s"), col("tmpfs", "clips_per_s"))
        y = ratios(col(mp, "vidfs_cpu_ms"), mem_cpu)
        goals.append("  With FUSE requests of a whole sample (the kernel's limit raised to %d pages): %sx tmpfs's clips/s (%s), at %sx"
                     " the vidfs CPU of 1 MiB requests." % (h["max_pages"], rng(x), verdict(x, 0.8), rng(y)))
    return "\n".join(L), goals


def verdict(x, goal, below=False):
    ok = (lambda v: v <= goal) if below else (lambda v: v >= goal)
    if all(ok(v) for v in x):
        return "met"
    return "met at the median" if ok(statistics.median(x)) else "not met"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--codecs", default=",".join(CODECS))
    ap.add_argument("--out", help="also write the JSON here")
    ap.add_argument("--max-pages", type=int, default=1024 if max_pages_settable() else 0,
                    help="also measure memory hits on a mount made with the kernel's FUSE page limit at this (0: not)")
    a = ap.parse_args()
    source = os.path.join(run.CACHE, "dataset-v1")
    import subprocess
    subprocess.run([os.path.join(HERE, "dataset.sh"), source], check=True)
    h = measure(source, a.rounds, a.codecs.split(","), a.max_pages or None)
    if a.out:
        json.dump(h, open(a.out, "w"))
    text, goals = section(h)
    print(text + "\n\n" + "\n".join(goals), file=sys.stderr)
    print(json.dumps(h))


if __name__ == "__main__":
    main()
