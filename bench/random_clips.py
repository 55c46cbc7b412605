#!/usr/bin/python3
"""Random clips each epoch (issues 32 and 39): fresh random clips every epoch from a dense grid, with
and without the training copy (--cache-dir DIR: its defaults, and --cache-keep copy with each fill
and codec), beside the pre-decoded .npy ceiling.

1. bench/dataset10.sh makes 24 H.264 videos of 10 s or more at 480p from Debian's opencv-doc
   footage, and 8 at 1080p (upscaled from it), cached in ~/.cache/vidfs/bench.
2. Every mount: --frames 16 --stride 2 --step 4 (a sample every 4 frames: T x stride / 8)
   --size 224x224 --workers 2, and a --cache-mem of at most a quarter of the decoded dataset.
3. The trainer (this script with --train) runs a DataLoader (batch 8, 2 persistent workers, no
   training step: flat out) over vidfs.PlanSampler(clips="random", clips_per_video=K, a fixed seed,
   set_epoch(e) each epoch, each epoch's plan holding the next one's, the last measured epoch's
   too, as in a longer run) for each epoch, and records per epoch: clips/s (wall), vidfs's CPU
   seconds per clip (utime + stime of its process, /proc/PID/stat), the CPU per clip of every
   process (the trainer, its workers, vidfs), and the mount's copy, cache and decode counts.
4. Contenders, taking turns in each round: no copy; the defaults (only --cache-dir and
   --cache-disk 8GiB: what a mount keeps, how it fills and the codec left to it); the copy with
   --copy-fill clips and each --cache-disk-codec (none, zstd, lz4, huff); the copy with
   --copy-fill videos (none); the ceiling: every sample of the same grid decoded once through a
   mount to one .npy file each (cached), read by the same DataLoader and sampler (the same clips).
   Each copy run starts from an empty --cache-dir. After its epochs, each copy run reads 16
   samples at random through the mount again and compares them with the ceiling's, byte for byte.
5. The same at 1080p: no copy, the defaults, copy clips, copy videos, ceiling.
6. 480p-12 (issue 39's run): 12 of the 480p videos (816 samples), 2 clips a video an epoch (--k-12):
   no copy, the defaults, copy videos, ceiling; its goals (each epoch's vidfs CPU at most 1.3x the
   same epoch's without a copy, epochs 5-6 decoding at most 5 % of their clips, epoch 6's CPU per
   clip at most 0.1x epoch 1's) are stated under "Against the goals". --only runs some contenders.
Prints Markdown; --doc FILE writes it into FILE between <!-- random:begin --> and <!-- random:end -->.
"""
import argparse
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))
import vidfs  # noqa: E402

sys.path.insert(0, HERE)
from run import machine  # noqa: E402  (make bench's description of the host)

CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "vidfs", "bench")
SPEC = ["--frames", "16", "--stride", "2", "--step", "4", "--size", "224x224", "--workers", "2"]
BATCH, WORKERS, SEED = 8, 2, 32
CHECK = 16  # samples compared with the ceiling after each copy run

# name: (label, extra mount flags); None: the ceiling
CONTENDERS = {
    "none": ("no copy", []),
    "clips": ("copy, fill clips, none", ["--copy-fill", "clips", "--cache-disk-codec", "none"]),
    "clips-zstd": ("copy, fill clips, zstd", ["--copy-fill", "clips", "--cache-disk-codec", "zstd"]),
    "clips-lz4": ("copy, fill clips, lz4", ["--copy-fill", "clips", "--cache-disk-codec", "lz4"]),
    "clips-huff": ("copy, fill clips, huff", ["--copy-fill", "clips", "--cache-disk-codec", "huff"]),
    "videos": ("copy, fill videos, none", ["--copy-fill", "videos", "--cache-disk-codec", "none"]),
    # Only --cache-dir and --cache-disk: what a mount keeps and how it fills left to its defaults.
    "defaults": ("copy, the defaults (--cache-dir, --cache-disk 8GiB)", "defaults"),
    "npy": ("pre-decoded .npy (ceiling)", None),
}
SETS = {  # name: (height, contenders, videos: all of the dataset, or the first N)
    "480p": (480, ["none", "defaults", "clips", "clips-zstd", "clips-lz4", "clips-huff", "videos", "npy"], None),
    "1080p": (1080, ["none", "defaults", "clips", "videos", "npy"], None),
    # Issue 39's run: 12 of the 480p videos (816 samples), K=2 (--k-12), 6 epochs.
    "480p-12": (480, ["none", "defaults", "videos", "npy"], 12),
}


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def proc_cpu(pid):
    """utime + stime of process pid, in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu(pid):
    """CPU seconds of process pid with its children: those reaped (cutime, cstime) and those alive,
    recursively (a mount's decoder helpers: they are its children, reaped only when they end)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    total = sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    for c in children(pid):
        try:
            total += tree_cpu(c)
        except OSError:
            pass  # ended meanwhile: counted in cutime once reaped
    return total


def children(pid):
    """pid's child processes (the DataLoader's workers)."""
    out = []
    try:
        for task in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, task)) as f:
                out += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return out


# ---------------------------------------------------------------------------------------------
# The trainer: python3 bench/random_clips.py --train ...; one JSON object on stdout.

def counts(mount):
    """The mount's counters this benchmark follows."""
    st = mount.stats()
    c = st.get("copy") or {}
    out = {"cache_hits": st["cache"]["hits"], "cache_misses": st["cache"]["misses"],
           "decoded_clips": st["decode"]["clips"], "fill_clips": st["decode"].get("fill_clips", 0),
           "frames_decoded": st["decode"]["frames_decoded"]}
    for k in ["hits", "misses", "complete", "partial", "videos", "frames", "used_bytes", "written_frames", "skipped",
              "corrupt", "read_errors", "evicted", "fill_queued", "backlog", "codec", "fill", "layout_videos", "whole_fills",
              "whole_fills_failed", "fill_budget", "backlog_full", "idle_fills", "estimated_bytes", "fits", "admitted", "refused",
              "capacity_bytes"]:
        if k in c:
            out["copy_" + k] = c[k]
    return out


def train(a):
    import torch
    import loaders  # noqa: E402  (bench/loaders.py: the ceiling's dataset)
    torch.set_num_threads(1)
    mount = vidfs.Mount(a.mnt)  # a mount, or for the ceiling a directory of a mount's index files
    data = loaders.NpyClips(a.ceiling, mount.labels()) if a.ceiling else vidfs.Dataset(mount)
    me = os.getpid()
    workers = set()

    def cpu():
        """CPU seconds of this process, its workers (alive: persistent) and vidfs."""
        r = resource.getrusage(resource.RUSAGE_SELF)
        workers.update(children(me))
        w = 0.0
        for p in list(workers):
            try:
                w += proc_cpu(p)
            except OSError:
                workers.discard(p)  # never happens with persistent workers before the end
        v = tree_cpu(a.vidfs_pid) if a.vidfs_pid else 0.0  # the mount and its decoder helpers
        return r.ru_utime + r.ru_stime + w + v, v

    # Epoch 1 counts from before the sampler writes its first plan, which starts vidfs decoding.
    stats0 = counts(mount) if a.vidfs_pid else None
    base = cpu(), time.perf_counter()
    # No epochs=: every epoch's plan holds the next one's, the last measured one's too, as in a
    # longer run (with epochs=, the last epoch would be served from what the one before decoded).
    sampler = vidfs.PlanSampler(mount, seed=SEED, clips="random", clips_per_video=a.k,
                                epochs=a.epochs if a.told else None)
    loader = torch.utils.data.DataLoader(data, batch_size=BATCH, num_workers=WORKERS, sampler=sampler,
                                         persistent_workers=True)
    epochs = []
    for e in range(a.epochs):
        sampler.set_epoch(e)
        if e == 0:
            (c0, v0), t0 = base
        else:
            (c0, v0), t0 = cpu(), time.perf_counter()
        n, waited = 0, 0.0
        it = iter(loader)
        while True:
            w0 = time.perf_counter()
            batch = next(it, None)
            waited += time.perf_counter() - w0  # the trainer blocked, waiting for its clips
            if batch is None:
                break
            n += batch[0].shape[0]
            if a.pace:
                time.sleep(a.pace * batch[0].shape[0])  # a trainer bound by its GPU: a.pace a clip
        secs = time.perf_counter() - t0
        c1, v1 = cpu()
        rec = {"epoch": e + 1, "clips": n, "seconds": secs, "waited_s": waited, "clips_per_s": n / secs,
               "cpu_s_per_clip": (c1 - c0) / n, "vidfs_cpu_s_per_clip": (v1 - v0) / n if a.vidfs_pid else None}
        if a.vidfs_pid:
            rec["stats"] = counts(mount)
        epochs.append(rec)
    print(json.dumps({"epochs": epochs, "stats0": stats0,
                      "samples_drawn": [len(sampler.epoch_samples(e)) for e in range(a.epochs)]}))


# ---------------------------------------------------------------------------------------------
# The driver.

class Mounted:
    """bin/vidfs mount SRC on a directory of its own, for as long as the with block; its log in logpath."""

    def __init__(self, source, flags, logpath):
        self.source, self.flags, self.logpath = source, flags, logpath

    def __enter__(self):
        self.dir = tempfile.mkdtemp(prefix="vidfs-random-mnt-", dir=CACHE)
        self.log = open(self.logpath, "w")
        self.proc = subprocess.Popen([os.path.join(ROOT, "bin", "vidfs"), "mount", self.source, self.dir, *SPEC, *self.flags],
                                     stderr=self.log)
        for _ in range(600):
            if os.path.exists(os.path.join(self.dir, ".vidfs", "stats")):
                return self
            if self.proc.poll() is not None:
                raise SystemExit("vidfs mount exited; see %s" % self.logpath)
            time.sleep(0.1)
        raise SystemExit("vidfs mount did not come up; see %s" % self.logpath)

    def __exit__(self, *exc):
        self.proc.send_signal(signal.SIGINT)
        try:
            self.rc = self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.rc = self.proc.wait()
        self.log.close()
        try:
            os.rmdir(self.dir)
        except OSError:
            pass


def mount_log_problems(path):
    """WARN and ERROR lines of a mount's log (and Go panics), with how many."""
    bad = [line.rstrip() for line in open(path) if "level=WARN" in line or "level=ERROR" in line or line.startswith("panic")]
    return bad


def cache_mem_for(samples, sample_bytes):
    """At most a quarter of the decoded dataset, at most 512 MiB, in whole 16 MiB."""
    quarter = samples * sample_bytes // 4
    mib = min(512, quarter // (1 << 20) // 16 * 16)
    return "%dMiB" % mib, mib << 20


def prepare(name, height, videos=None):
    """The dataset, its layout, the ceiling's .npy files and an index directory for the ceiling's
    sampler (the mount's layout.json, index.csv, videos.npy, labels.npy). With videos, a source of
    the first that many of the dataset at that height (hard links), half from each class folder."""
    full = os.path.join(CACHE, "dataset10-%dp" % height)
    subprocess.run([os.path.join(HERE, "dataset10.sh"), full, str(height)], check=True)
    source = full
    if videos:
        source = os.path.join(CACHE, "dataset10-%s" % name)
        if not os.path.exists(os.path.join(source, ".complete")):
            shutil.rmtree(source, ignore_errors=True)
            for cls in sorted(os.listdir(full)):
                if not os.path.isdir(os.path.join(full, cls)):
                    continue
                os.makedirs(os.path.join(source, cls))
                for f in sorted(os.listdir(os.path.join(full, cls)))[:videos // 2]:
                    os.link(os.path.join(full, cls, f), os.path.join(source, cls, f))
            open(os.path.join(source, ".complete"), "w").close()
    ceiling = os.path.join(CACHE, "random-ceiling-%s-v1" % name)
    index = os.path.join(CACHE, "random-index-%s" % name)
    logpath = os.path.join(CACHE, "random-logs", "%s-ceiling.log" % name)
    with Mounted(source, ["--cache-mem", "256MiB"], logpath) as m:
        mount = vidfs.Mount(m.dir)
        lay = mount.layout
        shutil.rmtree(index, ignore_errors=True)
        os.makedirs(os.path.join(index, ".vidfs"))
        for f in ["index.csv", "classes.txt", ".vidfs/layout.json", ".vidfs/videos.npy", ".vidfs/labels.npy"]:
            shutil.copy(os.path.join(m.dir, f), os.path.join(index, f))
        if not os.path.exists(os.path.join(ceiling, ".complete")):
            shutil.rmtree(ceiling, ignore_errors=True)
            os.makedirs(ceiling)
            log("%s ceiling: decoding %d samples once to %s" % (name, len(mount), ceiling))
            t0 = time.time()
            mount.write_plan(list(range(len(mount))))  # decoded ahead of this one reader
            for i in range(len(mount)):
                np.save(os.path.join(ceiling, "%d.npy" % i), mount.read(i))
            open(os.path.join(ceiling, ".complete"), "w").close()
            log("%s ceiling: %.0f s" % (name, time.time() - t0))
    return source, ceiling, index, lay


def run_trainer(mnt, epochs, k, vidfs_pid=0, ceiling=None, pace=0.0, told=False):
    cmd = ["/usr/bin/python3", os.path.abspath(__file__), "--train", "--mnt", mnt, "--epochs", str(epochs), "--k", str(k),
           "--pace", str(pace)] + (["--told"] if told else [])
    if vidfs_pid:
        cmd += ["--vidfs-pid", str(vidfs_pid)]
    if ceiling:
        cmd += ["--ceiling", ceiling]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def check_against_ceiling(mnt, ceiling, n):
    """Reads CHECK samples of the mount at random (a fixed seed) and compares them with the
    ceiling's: (samples that differ, reads the copy served)."""
    mount = vidfs.Mount(mnt)
    pick = np.random.default_rng(SEED).choice(len(mount), min(CHECK, len(mount)), replace=False)
    h0 = (mount.stats().get("copy") or {}).get("hits", 0)
    bad = [int(i) for i in pick if not np.array_equal(mount.read(int(i)), np.load(os.path.join(ceiling, "%d.npy" % i)))]
    return bad, (mount.stats().get("copy") or {}).get("hits", 0) - h0


def run_one(setname, c, source, ceiling, index, cache_mem, epochs, k, rnd):
    label, flags = CONTENDERS[c]
    logs = os.path.join(CACHE, "random-logs")
    if flags is None:
        res = run_trainer(index, epochs, k, ceiling=ceiling)
        res["log"] = None
        return res
    extra = ["--cache-mem", cache_mem]
    copydir = None
    if c != "none":
        copydir = tempfile.mkdtemp(prefix="vidfs-random-copy-", dir=CACHE)  # empty: the copy starts empty
        if flags == "defaults":
            extra += ["--cache-dir", copydir, "--cache-disk", "8GiB"]
        else:
            extra += ["--cache-dir", copydir, "--cache-keep", "copy"] + flags
    logpath = os.path.join(logs, "%s-%s-r%d.log" % (setname, c, rnd))
    try:
        with Mounted(source, extra, logpath) as m:
            res = run_trainer(m.dir, epochs, k, vidfs_pid=m.proc.pid)
            if copydir:
                res["check_bad"], res["check_copy_hits"] = check_against_ceiling(m.dir, ceiling, CHECK)
                res["final"] = counts(vidfs.Mount(m.dir))
                res["copy_disk_bytes"] = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(copydir) for f in fs)
        res["rc"] = m.rc
    finally:
        if copydir:
            shutil.rmtree(copydir, ignore_errors=True)
    res["log"] = logpath
    res["log_problems"] = mount_log_problems(logpath)
    return res


def run_set(setname, rounds, epochs, k, only=None):
    height, contenders, videos = SETS[setname]
    if only:
        contenders = [c for c in contenders if c in only]
    source, ceiling, index, lay = prepare(setname, height, videos)
    cache_mem, cache_bytes = cache_mem_for(lay["samples"], lay["sample_bytes"])
    decoded = lay["samples"] * lay["sample_bytes"]
    log("%s: %d videos, %d samples, %.2f GB decoded, --cache-mem %s (%.1fx smaller), K=%d: %d clips an epoch" % (
        setname, lay["videos"], lay["samples"], decoded / 1e9, cache_mem, decoded / cache_bytes, k, k * lay["videos"]))
    rows = vidfs.Mount(index).index()
    needed = len({(row["video"], int(row["start"]) + j * lay["stride"]) for row in rows for j in range(lay["frames"])})
    runs = {c: [] for c in contenders}
    for r in range(rounds):
        for c in contenders if r % 2 == 0 else contenders[::-1]:
            t0 = time.time()
            res = run_one(setname, c, source, ceiling, index, cache_mem, epochs, k, r + 1)
            runs[c].append(res)
            e = res["epochs"]
            log("  %s round %d %-34s %s clips/s; vidfs ms/clip %s%s (%.0f s)" % (
                setname, r + 1, CONTENDERS[c][0], " ".join("%.0f" % x["clips_per_s"] for x in e),
                " ".join("%.0f" % (1000 * x["vidfs_cpu_s_per_clip"]) for x in e) if e[0]["vidfs_cpu_s_per_clip"] is not None else "-",
                "; copy hits/misses/complete %s" % " ".join("%d/%d/%d" % (x["stats"]["copy_hits"], x["stats"]["copy_misses"], x["stats"]["copy_complete"])
                                                        for x in e) if "copy_hits" in e[0].get("stats", {}) else "",
                time.time() - t0))
            if res.get("check_bad"):
                log("  !! %d of %d samples read back differ from the ceiling's: %s" % (len(res["check_bad"]), CHECK, res["check_bad"]))
            if res.get("log_problems"):
                log("  !! %d WARN/ERROR lines in %s, the first: %s" % (len(res["log_problems"]), res["log"], res["log_problems"][0]))
    return {"lay": lay, "cache_mem": cache_mem, "decoded": decoded, "k": k, "epochs": epochs, "runs": runs, "needed_frames": needed,
            "contenders": contenders, "height": height}


# ---------------------------------------------------------------------------------------------
# The tables.

def med(v):
    return statistics.median(v) if v else float("nan")


def rng(v, fmt):
    if not v:
        return "-"
    if len(v) == 1:
        return fmt % v[0]
    return (fmt + " (" + fmt + "-" + fmt + ")") % (statistics.median(v), min(v), max(v))


def per_epoch(runs, key, e):
    return [r["epochs"][e][key] for r in runs if r["epochs"][e][key] is not None]


def first_reaching(run, ceil_rate, ceil_none=None):
    """The first epoch whose clips/s is at least 0.8x the ceiling's (the ceiling's median over its
    epochs, same round) and whose vidfs CPU per clip is at most 0.2x epoch 1's; 0 if none."""
    e1 = run["epochs"][0]["vidfs_cpu_s_per_clip"]
    for x in run["epochs"]:
        if x["clips_per_s"] >= 0.8 * ceil_rate and x["vidfs_cpu_s_per_clip"] <= 0.2 * e1:
            return x["epoch"]
    return 0


def first_rate(run, ceil_rate):
    """The first epoch whose clips/s is at least 0.8x the ceiling's; 0 if none."""
    for x in run["epochs"]:
        if x["clips_per_s"] >= 0.8 * ceil_rate:
            return x["epoch"]
    return 0


def section(sets, began, minutes, rounds, load):
    L = ["<!-- random:begin -->", "## Random clips each epoch: the training copy (issues 32 and 39)", ""]
    mach = machine()
    L += ["Measured %s on %s, by `make bench-random` (`bench/random_clips.py --rounds %d`, %.0f minutes; load average %s at the"
          " start, %s at the end). Median over rounds where there are several, taken in turns (the order reversed"
          " every other round)." % (time.strftime("%Y-%m-%d", time.localtime(began)), mach, rounds, minutes, load[0],
                                     load[1] if len(load) > 1 else "-"), ""]
    goals = []
    for name, s in sets.items():
        lay, runs, E = s["lay"], s["runs"], s["epochs"]
        L += ["### %s: %d videos, %d samples" % (name, lay["videos"], lay["samples"]), ""]
        L += ["Videos of 10 s or more (`bench/dataset10.sh`: Megamind.avi and vtest.avi of opencv-doc, H.264 veryfast,"
              " GOP 48, B-frames%s); mounts `%s --cache-mem %s` (the dataset is %.2f GB decoded, %.1fx the memory cache);"
              " `PlanSampler(clips=\"random\", clips_per_video=%d)`: %d fresh clips an epoch, a new draw each epoch"
              " (`set_epoch`), each epoch's plan holding the next one's; a DataLoader of batch %d and %d persistent workers, no training step. Each cell: clips/s"
              " (vidfs's CPU per clip, ms). The ceiling reads the same clips from one .npy file per sample." % (
                  ", upscaled from 528 and 576 lines" if s["height"] > 576 else "", " ".join(SPEC), s["cache_mem"],
                  s["decoded"] / 1e9, s["decoded"] / (int(s["cache_mem"][:-3]) << 20), s["k"], s["k"] * lay["videos"],
                  BATCH, WORKERS), ""]
        L.append("| run | " + " | ".join("epoch %d" % (e + 1) for e in range(E)) + " |")
        L.append("|---|" + "---:|" * E)
        for c in s["contenders"]:
            cells = []
            for e in range(E):
                rate = med(per_epoch(runs[c], "clips_per_s", e))
                v = per_epoch(runs[c], "vidfs_cpu_s_per_clip", e)
                cells.append("%.1f (%.1f)" % (rate, 1000 * med(v)) if v else "%.1f" % rate)
            L.append("| %s | %s |" % (CONTENDERS[c][0], " | ".join(cells)))
        L.append("")
        L.append("CPU per clip of every process (the trainer, its workers, vidfs), ms:")
        L.append("")
        L.append("| run | " + " | ".join("epoch %d" % (e + 1) for e in range(E)) + " |")
        L.append("|---|" + "---:|" * E)
        for c in s["contenders"]:
            L.append("| %s | %s |" % (CONTENDERS[c][0], " | ".join(
                "%.1f" % (1000 * med(per_epoch(runs[c], "cpu_s_per_clip", e))) for e in range(E))))
        L.append("")
        L += ["Each epoch, first round: samples served from the copy / looked for in it and missing / decoded (the"
              " mount's `.vidfs/stats`, copy and decode, counted over the epoch: the plan holds the next epoch too,"
              " so some of an epoch's samples are fetched during the one before); then videos complete of %d and MB"
              " on disk at its end:" % lay["videos"], "",
              "| run | " + " | ".join("epoch %d" % (e + 1) for e in range(E)) + " | read back against the ceiling |",
              "|---|" + "---:|" * E + "---|"]
        for c in [c for c in s["contenders"] if c != "npy"]:
            r0 = runs[c][0]
            cells, prev = [], dict(r0["stats0"], copy_hits=r0["stats0"].get("copy_hits", 0), copy_misses=r0["stats0"].get("copy_misses", 0))
            for x in r0["epochs"]:
                st = x["stats"]
                d = {k: st.get(k, 0) - prev.get(k, 0) for k in ("copy_hits", "copy_misses", "decoded_clips")}
                prev = st
                cells.append("%d / %d / %d, %d, %.0f" % (d["copy_hits"], d["copy_misses"], d["decoded_clips"],
                                                         st.get("copy_complete", 0), st.get("copy_used_bytes", 0) / 1e6)
                             if c != "none" else "- / - / %d" % d["decoded_clips"])
            bad = sum(len(r.get("check_bad", [])) for r in runs[c])
            L.append("| %s | %s | %s |" % (CONTENDERS[c][0], " | ".join(cells), "%d of %d differ (%d served by the copy)" % (
                bad, CHECK * len(runs[c]), sum(r.get("check_copy_hits", 0) for r in runs[c])) if c != "none" else "-"))
        L.append("")
        L += ["The copy at the end of each run (first round; after the check's reads): frames kept of those the"
              " samples use, frames not written (the writer behind: decoded again when next needed), bytes on disk"
              " per frame (%d decoded), videos complete, videos still queued to be decoded whole:" % (
                  lay["height"] * lay["width"] * 3), "",
              "| run | frames kept | not written | bytes per frame | complete | queued whole |", "|---|---:|---:|---:|---:|---:|"]
        for c in [c for c in s["contenders"] if c not in ("none", "npy")]:
            f = runs[c][0]["final"]
            if "copy_frames" not in f:  # the defaults kept samples
                L.append("| %s | - | - | - | - | - |" % CONTENDERS[c][0])
                continue
            L.append("| %s | %d%s | %d | %.0f | %d of %d | %d |" % (
                CONTENDERS[c][0], f["copy_frames"], " of %d" % s["needed_frames"] if "needed_frames" in s else "", f["copy_skipped"], f["copy_used_bytes"] / max(f["copy_frames"], 1),
                f["copy_complete"], f.get("copy_layout_videos", lay["videos"]), f["copy_fill_queued"]))
        L.append("")
        # Ratios, round by round against the same round's no-copy run and ceiling.
        ceil = [med([x["clips_per_s"] for x in r["epochs"]]) for r in runs["npy"]]
        none_v = [r["epochs"][0]["vidfs_cpu_s_per_clip"] for r in runs["none"]]
        none_all = [r["epochs"][0]["cpu_s_per_clip"] for r in runs["none"]]
        tail = [e for e in (4, 5) if e < E] or [E - 1]
        L += ["| run | epochs %s against the ceiling | vidfs CPU per clip, epoch %d / epoch 1 | epoch 1 CPU per clip / no copy's, vidfs (every process) | first epoch at 0.8x the ceiling | first epoch at 0.8x the ceiling and at most 0.2x epoch 1's vidfs CPU per clip |" % (
            "-".join(str(e + 1) for e in tail), E), "|---|---:|---:|---:|---:|---:|"]
        for c in [c for c in s["contenders"] if c != "npy"]:
            rs = runs[c]
            late = [med([r["epochs"][e]["clips_per_s"] for e in tail]) / cr for r, cr in zip(rs, ceil)]
            shrink = [r["epochs"][E - 1]["vidfs_cpu_s_per_clip"] / r["epochs"][0]["vidfs_cpu_s_per_clip"] for r in rs]
            e1v = [r["epochs"][0]["vidfs_cpu_s_per_clip"] / n for r, n in zip(rs, none_v)]
            e1a = [r["epochs"][0]["cpu_s_per_clip"] / n for r, n in zip(rs, none_all)]
            reach = [first_reaching(r, cr) for r, cr in zip(rs, ceil)]
            rate = [first_rate(r, cr) for r, cr in zip(rs, ceil)]
            within = lambda xs: ", ".join("%d" % x if x else "not within %d" % E for x in xs)
            L.append("| %s | %s | %s | %s (%s) | %s | %s |" % (
                CONTENDERS[c][0], rng(late, "%.2fx"), rng(shrink, "%.2fx"), rng(e1v, "%.2fx") if c != "none" else "1",
                rng(e1a, "%.2fx") if c != "none" else "1", within(rate), within(reach)))
            s.setdefault("summary", {})[c] = {"late": late, "shrink": shrink, "e1v": e1v, "e1a": e1a, "reach": reach, "rate": rate}
        L += ["", "The ceiling ran at %s clips/s (median of its epochs)." % rng(ceil, "%.0f"), ""]
        sm = s.get("summary", {})
        at = lambda xs: ", ".join("epoch %d" % x if x else "not within %d epochs" % E for x in xs)
        if "clips" in sm and "videos" in sm:
            d, v = sm["clips"], sm["videos"]
            goals.append("- %s, once the copy holds the clips (at least 0.8x the ceiling's clips/s, vidfs's CPU per clip at most"
                         " 0.2x epoch 1's): in the default mode (fill clips) at %s; with whole-video filling at %s (the"
                         " issue: epoch 2). Epochs %s against the ceiling: %s in the default mode, %s with whole-video"
                         " filling; vidfs's CPU per clip in epoch %d against epoch 1: %s and %s." % (
                             name, at(d["reach"]), at(v["reach"]), "-".join(str(e + 1) for e in tail), rng(d["late"], "%.2fx"),
                             rng(v["late"], "%.2fx"), E, rng(d["shrink"], "%.2fx"), rng(v["shrink"], "%.2fx")))
            goals.append("- %s, epoch 1's vidfs CPU per clip against a mount without the copy: %s in the default mode (goal: at"
                         " most 1.3x: %s); %s with whole-video filling (every process: %s and %s)." % (
                             name, rng(d["e1v"], "%.2fx"), "met" if med(d["e1v"]) <= 1.3 else "not met", rng(v["e1v"], "%.2fx"),
                             rng(d["e1a"], "%.2fx"), rng(v["e1a"], "%.2fx")))
        if "defaults" in runs and "none" in runs:
            goals += defaults_goals(name, runs, E)
        problems = ["%s round %d: %d (%s)" % (CONTENDERS[c][0], i + 1, len(r["log_problems"]), r["log_problems"][0][:160])
                    for c in s["contenders"] for i, r in enumerate(runs[c]) if r.get("log_problems")]
        exits = ["%s round %d: exit status %s" % (CONTENDERS[c][0], i + 1, r["rc"])
                 for c in s["contenders"] for i, r in enumerate(runs[c]) if r.get("rc") not in (None, 0)]
        L += ["Mount logs, WARN and ERROR lines: %s. Mounts that did not exit 0 on Ctrl-C: %s." % (
            "; ".join(problems) if problems else "none", "; ".join(exits) if exits else "none"), ""]
    L += ["### Against the goals", ""] + goals
    L.append("<!-- random:end -->")
    return "\n".join(L)


def decoded_share(run):
    """Per epoch, the share of its clips the mount decoded (the stats' decoded clips over the
    epoch: the plan holds the next epoch too, so a few are decoded during the one before)."""
    prev, out = run["stats0"], []
    for x in run["epochs"]:
        out.append((x["stats"]["decoded_clips"] - prev["decoded_clips"]) / x["clips"])
        prev = x["stats"]
    return out


def defaults_goals(name, runs, E):
    """Issue 39's goals for the defaults' row, round by round against the same round's no-copy run:
    no epoch's vidfs CPU above 1.3x the same epoch's without a copy; epochs 5-6 decode at most 5 % of
    their clips; epoch E's vidfs CPU per clip at most 0.1x epoch 1's."""
    worst, late, shrink = [], [], []
    for d, n in zip(runs["defaults"], runs["none"]):
        worst.append(max(x["vidfs_cpu_s_per_clip"] / y["vidfs_cpu_s_per_clip"] for x, y in zip(d["epochs"], n["epochs"])))
        share = decoded_share(d)
        late.append(max(share[4:6] or share[-1:]))
        shrink.append(d["epochs"][E - 1]["vidfs_cpu_s_per_clip"] / d["epochs"][0]["vidfs_cpu_s_per_clip"])
    per = [" ".join("%.2f" % (x["vidfs_cpu_s_per_clip"] / y["vidfs_cpu_s_per_clip"]) for x, y in zip(d["epochs"], n["epochs"]))
           for d, n in zip(runs["defaults"], runs["none"])]
    shares = [" ".join("%.0f%%" % (100 * v) for v in decoded_share(d)) for d in runs["defaults"]]
    return ["- %s, the defaults (only --cache-dir and --cache-disk): vidfs CPU of each epoch against the same epoch without"
            " a copy %s (the worst %s; goal: at most 1.3x: %s); clips decoded each epoch %s (epochs 5-6 at most %s; goal: at"
            " most 5 %%: %s); vidfs CPU per clip, epoch %d / epoch 1: %s (goal: at most 0.1x: %s)." % (
                name, "; ".join(per), rng(worst, "%.2fx"), "met" if max(worst) <= 1.3 else "not met", "; ".join(shares),
                rng([100 * x for x in late], "%.0f %%"), "met" if max(late) <= 0.05 else "not met", E, rng(shrink, "%.2fx"),
                "met" if max(shrink) <= 0.1 else "not met")]


def write_doc(doc, text):
    cur = open(doc).read() if os.path.exists(doc) else "# Benchmarks\n"
    pat = re.compile(r"<!-- random:begin -->.*?<!-- random:end -->", re.S)
    cur = pat.sub(lambda m: text, cur) if pat.search(cur) else cur.rstrip("\n") + "\n\n" + text + "\n"
    open(doc, "w").write(cur)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=6, help="epochs of each 480p run")
    ap.add_argument("--epochs-1080p", type=int, default=6)
    ap.add_argument("--k", type=int, default=8, help="clips per video an epoch at 480p (24 videos)")
    ap.add_argument("--k-1080p", type=int, default=6, help="clips per video an epoch at 1080p (8 videos)")
    ap.add_argument("--k-12", type=int, default=2, help="clips per video an epoch of 480p-12 (12 of the 480p videos)")
    ap.add_argument("--sets", default="480p-12,480p,1080p")
    ap.add_argument("--only", help="run only these contenders, comma-separated (%s)" % ", ".join(CONTENDERS))
    ap.add_argument("--doc", help="write the section into this Markdown file")
    ap.add_argument("--from", dest="saved", help="render an earlier run's results.json")
    # the trainer
    ap.add_argument("--train", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--mnt", help=argparse.SUPPRESS)
    ap.add_argument("--ceiling", help=argparse.SUPPRESS)
    ap.add_argument("--vidfs-pid", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--pace", type=float, default=0.0, help=argparse.SUPPRESS)
    ap.add_argument("--told", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.train:
        a.k = int(a.k)
        return train(a)
    if a.saved:
        r = json.load(open(a.saved))
        text = section(r["sets"], r["began"], r["minutes"], r["rounds"], r["load"])
    else:
        began = time.time()
        load = ["%.2f" % os.getloadavg()[0]]
        os.makedirs(os.path.join(CACHE, "random-logs"), exist_ok=True)
        sets = {}
        for name in a.sets.split(","):
            e, k = {"480p": (a.epochs, a.k), "480p-12": (a.epochs, a.k_12)}.get(name, (a.epochs_1080p, a.k_1080p))
            sets[name] = run_set(name, a.rounds, e, k, a.only.split(",") if a.only else None)
        load.append("%.2f" % os.getloadavg()[0])
        r = {"sets": sets, "began": began, "minutes": (time.time() - began) / 60, "rounds": a.rounds, "load": load,
             "machine": machine()}
        saved = os.path.join(CACHE, "random-results.json")
        json.dump(r, open(saved, "w"))
        log("results saved in %s (--from re-renders them)" % saved)
        text = section(sets, began, r["minutes"], a.rounds, load)
    print(text)
    if a.doc:
        write_doc(a.doc, text)
        log("wrote %s" % a.doc)


if __name__ == "__main__":
    main()
