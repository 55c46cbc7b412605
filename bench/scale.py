#!/usr/bin/python3
"""vidfs at the size of real datasets (issue 18): what grows with the number of videos.

Sources are hard links to one H.264 video (10 s, 300 frames, 340x256 test pattern, x264, GOP 250
with B-frames), so that every decode costs the same: 40 videos, and 1,000 to 240,000 in up to 400
class folders (ext4 allows 65,000 links to a file, so each source links to byte-identical
copies of the video, one for every 50,000 links). Sources and probe caches stay in
~/.cache/vidfs/bench/scale, built once.
Every mount is `--frames 16 --stride 2 --size 224x224 --cache-mem 1GiB` (17 samples a video).

For each size N, against the 40-video mount in the same run:
1. First mount (an empty probe cache; sizes over --cold-max only when their probe cache is
   missing or with --cold) and remount (from the probe cache), to .vidfs/stats appearing.
2. vidfs's resident memory (VmRSS) right after each mount. Per video: the median at N less the
   median at 40, over the videos between them. Per sample: a mount of the same N videos with
   --step 4 (68 samples a video, 4x) against --step 16, over the samples between them (sizes up
   to --per-sample-max).
3. DataLoader rounds taking turns between 40 and N, each on a fresh mount (an empty cache, so
   that every clip is a decode at both sizes): vidfs.Dataset with a vidfs.PlanSampler, 2 workers,
   batch 8, flat out; after --warm batches, --batches batches are counted: clips/s, CPU seconds
   per clip of the trainer, its workers and vidfs together, and vidfs's own.
4. A Dataset[i] item's cost beyond its read: Dataset[i] of a cached sample against a raw pread
   of the same bytes (and Mount.read), taking turns; the first item (which loads what Dataset
   loads once) apart.
5. A plan written and applied: PlanSampler(...) construction (drawing the order of this epoch and
   the next and writing it), then the time from its close until .vidfs/stats shows it.
6. Readers' longest read while a plan is replaced: --readers threads (another process) pread
   cached samples in a loop; for --phase seconds nothing else happens, then for --phase seconds
   plans of two epochs (cached samples first, so that nothing is decoded: --prefetch covers
   just those) replace one another back to back. One more thread of that process preads the same
   bytes from a tmpfs file: the control, what the host's scheduling alone costs a read.
Prints a table (and saves the results as JSON; --from re-renders them; --doc writes the section
between the scale markers of docs/benchmarks.md and its chart, docs/benchmarks-scale.png).
"""
import argparse
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))
import run  # noqa: E402  (machine(), log())
import vidfs  # noqa: E402

CACHE = os.path.join(run.CACHE, "scale")
SPEC = ["--frames", "16", "--stride", "2", "--size", "224x224", "--cache-mem", "1GiB"]
SMALL = 40
LINKS = 50000  # hard links per copy of the video (ext4: at most 65,000 links to a file)
PY = "/usr/bin/python3"
MiB = 1 << 20
log = run.log


def the_video():
    """The one video every source links to: 10 s, 300 frames, 340x256 test pattern, x264 GOP 250
    with B-frames (Debian's ffmpeg CLI, as bench/dataset.sh uses)."""
    path = os.path.join(CACHE, "video-v1.mp4")
    if not os.path.exists(path):
        os.makedirs(CACHE, exist_ok=True)
        subprocess.run(["ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                        "testsrc=size=340x256:rate=30:duration=10", "-c:v", "libx264", "-preset", "medium", "-g", "250",
                        "-bf", "3", "-pix_fmt", "yuv420p", "-an", path + ".tmp.mp4"], check=True)
        os.rename(path + ".tmp.mp4", path)
    return path


def source(n):
    """CACHE/src-N: n hard links to the video, in min(400, n/25) class folders (built once)."""
    d = os.path.join(CACHE, "src-%d" % n)
    if os.path.exists(os.path.join(d, ".complete")):
        return d
    video = the_video()
    log("source: %d videos in %s" % (n, d))
    subprocess.run(["rm", "-rf", d], check=True)
    classes = max(1, min(400, n // 25))
    for c in range(classes):
        os.makedirs(os.path.join(d, "c%03d" % c))
    copies = os.path.join(CACHE, "copies")
    os.makedirs(copies, exist_ok=True)
    for i in range(n):
        if i % LINKS == 0:  # a copy of its own for each source's every LINKS videos
            target = os.path.join(copies, "video-v1-%d-%d.mp4" % (n, i // LINKS))
            if not os.path.exists(target):
                subprocess.run(["cp", video, target], check=True)
        os.link(target, os.path.join(d, "c%03d" % (i % classes), "v%06d.mp4" % i))
    open(os.path.join(d, ".complete"), "w").close()
    return d


def status(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) << 10
    return 0


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Mounted:
    """bin/vidfs mount of src with SPEC and extra flags, its probe cache in probe, for as long as
    the with block. ready_s: from starting the process to .vidfs/stats appearing."""

    def __init__(self, src, probe, extra=(), name="mnt"):
        self.src, self.probe, self.extra, self.name = src, probe, list(extra), name

    def __enter__(self):
        self.dir = os.path.join(CACHE, self.name)
        os.makedirs(self.dir, exist_ok=True)
        subprocess.run(["fusermount3", "-u", "-z", self.dir], stderr=subprocess.DEVNULL)
        self.logpath = os.path.join(CACHE, self.name + ".log")
        self.log = open(self.logpath, "w")
        t0 = time.perf_counter()
        self.proc = subprocess.Popen([os.path.join(ROOT, "bin", "vidfs"), "mount", self.src, self.dir, *SPEC,
                                      "--probe-cache", self.probe, *self.extra], stderr=self.log)
        stats = os.path.join(self.dir, ".vidfs", "stats")
        while not os.path.exists(stats):
            if self.proc.poll() is not None:
                raise SystemExit("vidfs mount exited; see %s" % self.logpath)
            if time.perf_counter() - t0 > 3600:
                raise SystemExit("vidfs mount did not come up in an hour; see %s" % self.logpath)
            time.sleep(0.02)
        self.ready_s = time.perf_counter() - t0
        self.pid = self.proc.pid
        return self

    def rss(self):
        return status(self.pid, "VmRSS")

    def stats(self):
        with open(os.path.join(self.dir, ".vidfs", "stats")) as f:
            return json.load(f)

    def __exit__(self, *exc):
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(120)
        self.log.close()


def child(mode, *args):
    out = subprocess.run([PY, os.path.abspath(__file__), mode, *map(str, args)], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


# ---- measurements run in a child process (python3 bench/scale.py MODE ...) ----

def live_children():
    me, out = os.getpid(), []
    for task in os.listdir("/proc/%d/task" % me):
        with open("/proc/%d/task/%s/children" % (me, task)) as f:
            out += [int(x) for x in f.read().split()]
    return out


def loader_child(mnt, vidfs_pid, batches, warm, seed):
    """DataLoader over vidfs.Dataset with a PlanSampler; CPU and time of batches after warm."""
    import torch
    torch.set_num_threads(1)
    m = vidfs.Mount(mnt)
    t0 = time.perf_counter()
    sampler = vidfs.PlanSampler(m, seed=seed, epochs=1)
    plan_s = time.perf_counter() - t0
    loader = torch.utils.data.DataLoader(vidfs.Dataset(m), batch_size=8, num_workers=2, sampler=sampler)

    def cpu():
        r = os.times()
        return r.user + r.system + sum(cpu_seconds(p) for p in live_children()), cpu_seconds(vidfs_pid)
    it = iter(loader)
    for _ in range(warm):
        next(it)
    d0 = m.stats()["decode"]
    c0, v0 = cpu()
    w0 = time.perf_counter()
    clips = 0
    for _ in range(batches):
        clips += next(it)[0].shape[0]
    w1 = time.perf_counter()
    c1, v1 = cpu()
    st = m.stats()
    del it
    frames = st["decode"]["frames_decoded"] - d0["frames_decoded"]
    return {"clips": clips, "seconds": w1 - w0, "clips_per_s": clips / (w1 - w0),
            "cpu_s_per_clip": (c1 - c0 + v1 - v0) / clips, "vidfs_cpu_s_per_clip": (v1 - v0) / clips,
            "plan_sampler_s": plan_s, "hit_rate": st["cache"]["hit_rate"],
            # the decode work behind those clips: frames the decoders put out (prefetch included)
            "frames_decoded": frames, "frames_per_clip": frames / clips,
            "vidfs_cpu_s_per_frame": (v1 - v0) / max(frames, 1)}


def item_child(mnt, reps):
    """Dataset[i] of a cached sample against Mount.read(i) and a raw pread of its bytes."""
    m = vidfs.Mount(mnt)
    i = len(m) // 2
    m.read(i)  # decoded and cached
    t = time.perf_counter()
    ds = vidfs.Dataset(m)
    made = time.perf_counter() - t
    ds[i]
    first = time.perf_counter() - t
    fd = os.open(os.path.join(mnt, "clips.npy"), os.O_RDONLY)
    buf = bytearray(m.sample_bytes)
    off = m.header + i * m.sample_bytes
    item, read, raw = [], [], []
    for _ in range(reps):
        for what, f in [(item, lambda: ds[i]), (read, lambda: m.read(i)), (raw, lambda: os.preadv(fd, [buf], off))]:
            t = time.perf_counter()
            f()
            what.append(time.perf_counter() - t)
    return {"first_item_s": first, "dataset_s": made, "item_s": statistics.median(item), "read_s": statistics.median(read),
            "raw_s": statistics.median(raw), "beyond_s": statistics.median(item) - statistics.median(raw)}


def await_plan(stats, writes, every=0.005):
    """Waits until stats() (a mount's .vidfs/stats) counts more than writes plans written, and
    returns those stats."""
    while True:
        st = stats()
        if st["plan"]["writes"] > writes:
            return st
        time.sleep(every)


def plan_child(mnt):
    """PlanSampler construction (draws this epoch's and the next's order and writes them), then
    from its end until the stats show the plan."""
    import torch  # noqa: F401  (a trainer has it loaded; PlanSampler draws with it)
    m = vidfs.Mount(mnt)
    w0 = m.stats()["plan"]["writes"]
    t0 = time.perf_counter()
    s = vidfs.PlanSampler(m, seed=7)
    t1 = time.perf_counter()
    st = await_plan(m.stats, w0)
    t2 = time.perf_counter()
    return {"construct_s": t1 - t0, "applied_after_s": t2 - t1, "entries": st["plan"]["length"], "samples": len(m),
            "sampler": type(s).__name__}


READER = """
import json, os, random, sys, threading, time
path, S, stop_at = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
hot = [int(x) for x in sys.argv[4].split(",")]
threads = int(sys.argv[5])
control = sys.argv[6]  # a tmpfs file of len(hot) samples: what the host's scheduling alone costs a read
out = [[] for _ in range(threads + 1)]
errors = []
def reader(k):
    fd, rnd, buf = os.open(path if k < threads else control, os.O_RDONLY), random.Random(k), bytearray(S)
    while time.monotonic() < stop_at:
        i = rnd.choice(hot) if k < threads else rnd.randrange(len(hot))
        t = time.monotonic()
        try:
            n = os.preadv(fd, [buf], i * S)
        except OSError as e:
            errors.append(str(e)); continue
        out[k].append((t, time.monotonic() - t))
        if n != S:
            errors.append("short read %d" % n)
ts = [threading.Thread(target=reader, args=(k,)) for k in range(threads + 1)]
[t.start() for t in ts]; [t.join() for t in ts]
print(json.dumps({"reads": [r for o in out[:threads] for r in o], "control": out[threads], "errors": errors[:10],
                  "error_count": len(errors)}))
"""


def replace_measure(mnt, hot, readers, phase):
    """Readers pread the hot samples for 2 phases; plans are replaced back to back in the second."""
    import numpy as np
    m = vidfs.Mount(mnt)
    n = len(m)
    for i in hot:
        m.read(i)
    rest = np.setdiff1d(np.arange(n, dtype=np.int32), np.array(hot, dtype=np.int32))
    length = min(2 * n, max(64 * n, 1 << 20))
    plans = []
    for r in range(2):
        rng = np.random.default_rng(r)
        body = np.concatenate([np.array(hot, dtype=np.int32)] + [rng.permutation(rest) for _ in range(2)])[:length]
        path = os.path.join(CACHE, "plan-%d.npy" % r)
        np.save(path, body.astype(np.int32))
        plans.append(open(path, "rb").read())
    control = "/dev/shm/vidfs-scale-control"
    with open(control, "wb") as f:
        for i in hot:
            f.write(m.read(i).tobytes())
    t0 = time.monotonic() + 1.0
    split, stop_at = t0 + phase, t0 + 2 * phase
    p = subprocess.Popen([PY, "-c", READER, os.path.join(mnt, "clips.raw"), str(m.sample_bytes), str(stop_at),
                          ",".join(map(str, hot)), str(readers), control], stdout=subprocess.PIPE, text=True)
    while time.monotonic() < split:
        time.sleep(0.05)
    writes, applied, w = [], [], m.stats()["plan"]["writes"]
    while time.monotonic() < stop_at - 0.5:
        a = time.monotonic()
        with open(os.path.join(mnt, ".vidfs", "order"), "wb") as f:
            f.write(plans[len(writes) % 2])
        b = time.monotonic()
        await_plan(m.stats, w, every=0.002)
        w += 1
        applied.append(time.monotonic() - b)
        writes.append(b - a)
    out, _ = p.communicate()
    os.unlink(control)
    r = json.loads(out)
    base = [d for t, d in r["reads"] if t0 <= t < split]
    during = [d for t, d in r["reads"] if split <= t < stop_at]
    cbase = [d for t, d in r["control"] if t0 <= t < split]
    cduring = [d for t, d in r["control"] if split <= t < stop_at]
    return {"entries": length, "plan_bytes": len(plans[0]), "replacements": len(writes),
            "write_s": statistics.median(writes) if writes else 0, "applied_after_s": max(applied) if applied else 0,
            "reads_before": len(base), "reads_during": len(during),
            "max_before_s": max(base) if base else 0, "max_during_s": max(during) if during else 0,
            "p99_before_s": pct(base, 99), "p99_during_s": pct(during, 99),
            "over10ms_before": sum(d > 0.01 for d in base), "over10ms_during": sum(d > 0.01 for d in during),
            "control_max_before_s": max(cbase) if cbase else 0, "control_max_during_s": max(cduring) if cduring else 0,
            "control_p99_before_s": pct(cbase, 99), "control_p99_during_s": pct(cduring, 99),
            "control_over10ms_during": sum(d > 0.01 for d in cduring), "control_reads_during": len(cduring),
            "errors": r["error_count"], "error_examples": r["errors"]}


def pct(v, q):
    if not v:
        return 0
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * q / 100))]


# ---- the run ----

def probe_dir(n, tag="probe"):
    return os.path.join(CACHE, "%s-%d" % (tag, n))


def mount_times(n, src, cold):
    """First mount (when cold) and remount; RSS right after each."""
    r = {"videos": n}
    probe = probe_dir(n)
    if cold or not os.path.isdir(probe):
        subprocess.run(["rm", "-rf", probe], check=True)
        with Mounted(src, probe) as mt:
            r["first_s"] = mt.ready_s
            time.sleep(1)
            r["first_ready_in"] = ready_in(mt.logpath)  # logged just after the mount serves
            r["rss_first"] = mt.rss()
    return r


def ready_in(logpath):
    mm = re.findall(r"ready_in=(\S+)", open(logpath).read())
    return mm[-1] if mm else ""


def per_sample_rss(n, src):
    """RSS after mounting the same videos with --step 16 (the default, T) and --step 4."""
    out = {}
    for step in (16, 4):
        with Mounted(src, probe_dir(n), ["--step", str(step)], name="mnt-step") as mt:
            time.sleep(1)
            st = mt.stats()
            out[step] = {"rss": mt.rss(), "samples": st["samples"]}
    return out


def rounds(sizes, srcs, a, res):
    """DataLoader rounds, taking turns between 40 videos and each larger size, each on a fresh mount."""
    for k in range(a.rounds):
        for n in sizes[1:]:
            order = [SMALL, n] if k % 2 == 0 else [n, SMALL]
            for m in order:
                with Mounted(srcs[m], probe_dir(m)) as mt:
                    time.sleep(0.5)
                    res[m]["remount_s"].append(mt.ready_s)
                    res[m]["rss"].append(mt.rss())
                    st = mt.stats()
                    res[m]["samples"] = st["samples"]
                    res[m]["mem_parts"].append(st["memory"])
                    r = child("loader", mt.dir, mt.pid, a.batches, a.warm, 1000 * k + n % 997)
                    r["rss_after"] = mt.rss()
                    st = mt.stats()  # (resident less the cache's buffers is no measure: they are touched only in part)
                    r["go_after"] = st["memory"]["go_heap_bytes"] + st["memory"]["go_runtime_bytes"]
                    res[m]["loader"].append(r)
                    log("round %d, %6d videos: remount %.2f s, RSS %.0f MiB, %.1f clips/s, %.3f CPU s/clip (vidfs %.3f), "
                        "PlanSampler %.2f s, hit rate %.2f" % (k + 1, m, mt.ready_s, res[m]["rss"][-1] / MiB, r["clips_per_s"],
                                                 r["cpu_s_per_clip"], r["vidfs_cpu_s_per_clip"], r["plan_sampler_s"], r["hit_rate"]))


def extras(n, src, a, res):
    """Dataset[i]'s cost beyond its read, plan write and apply, longest read while plans replace."""
    with Mounted(src, probe_dir(n)) as mt:
        res[n]["item"] = child("item", mt.dir, a.item_reps)
        log("%6d videos: Dataset[i] %.2f ms (first %.0f ms), Mount.read %.2f ms, pread %.2f ms" % (
            n, 1000 * res[n]["item"]["item_s"], 1000 * res[n]["item"]["first_item_s"], 1000 * res[n]["item"]["read_s"],
            1000 * res[n]["item"]["raw_s"]))
        res[n]["plan"] = child("plan", mt.dir)
        log("%6d videos: PlanSampler %.2f s, applied %.3f s after, %d entries" % (
            n, res[n]["plan"]["construct_s"], res[n]["plan"]["applied_after_s"], res[n]["plan"]["entries"]))
    hot = sorted(random.Random(n).sample(range(res[n]["samples"]), a.hot))
    with Mounted(src, probe_dir(n), ["--prefetch", str(a.hot)], name="mnt-replace") as mt:
        res[n]["replace"] = replace_measure(mt.dir, hot, a.readers, a.phase)
        r = res[n]["replace"]
        log("%6d videos: plan of %d entries replaced %d times (write %.2f s, applied within %.3f s); longest read %.1f ms "
            "before, %.1f ms during; %d errors" % (n, r["entries"], r["replacements"], r["write_s"], r["applied_after_s"],
                                                   1000 * r["max_before_s"], 1000 * r["max_during_s"], r["errors"]))


def med(v):
    return statistics.median(v) if v else float("nan")


def rng(v, fmt="%.1f", scale=1):
    if not v:
        return "-"
    v = [x * scale for x in v]
    if len(v) == 1:
        return fmt % v[0]
    return (fmt + " (" + fmt + "-" + fmt + ")") % (statistics.median(v), min(v), max(v))


def table(r):
    """The results as markdown."""
    sizes = sorted(int(n) for n in r["sizes"])
    R = {int(k): v for k, v in r["results"].items()}
    small = R[SMALL]
    L = ["Measured %s on %s by `bench/scale.py` (%s rounds, %d counted batches of 8 after %d, DataLoader with 2 workers). "
         "Median (range) over the rounds; ratios are against the 40-video mount of the same round." % (
             time.strftime("%Y-%m-%d", time.localtime(r["began"])), r["machine"], r["args"]["rounds"],
             r["args"]["batches"], r["args"]["warm"]), ""]
    head = "| | " + " | ".join("%s videos" % format(n, ",") for n in sizes) + " |"
    L += [head, "|---|" + "---:|" * len(sizes)]

    def row(name, f):
        L.append("| %s | %s |" % (name, " | ".join(f(n, R[n]) for n in sizes)))

    def ratio(key, n, x, fmt="%.2fx"):
        if n == SMALL:
            return "-"
        pairs = paired(R, n, key)
        return rng([b / a for a, b in pairs], fmt)
    row("samples", lambda n, x: format(x.get("samples", 0), ","))
    row("first mount (s)", lambda n, x: "%.2f" % x["first_s"] if "first_s" in x else "-")
    row("remount (s)", lambda n, x: rng(x["remount_s"], "%.2f"))
    row("resident after mount (MiB)", lambda n, x: rng(x["rss"], "%.0f", 1 / MiB))
    row("of which Go heap (MiB)", lambda n, x: rng([m["go_heap_bytes"] for m in x["mem_parts"]], "%.0f", 1 / MiB))
    row("per video beyond 40 videos' (B)", lambda n, x: "-" if n == SMALL else "%.0f" % (
        (med(x["rss"]) - med(small["rss"])) / (n - SMALL)))
    row("per sample beyond 40 videos' (B)", lambda n, x: "-" if n == SMALL else "%.0f" % (
        (med(x["rss"]) - med(small["rss"])) / (x["samples"] - small["samples"])))
    row("per sample, --step 4 against 16 (B)", lambda n, x: "%.0f" % (
        (x["step"]["4"]["rss"] - x["step"]["16"]["rss"]) / (x["step"]["4"]["samples"] - x["step"]["16"]["samples"]))
        if "step" in x else "-")
    row("clips/s", lambda n, x: rng([l["clips_per_s"] for l in x["loader"]]))
    row("clips/s against 40 videos", lambda n, x: ratio("clips_per_s", n, x))
    row("CPU s per clip (trainer + workers + vidfs)", lambda n, x: rng([l["cpu_s_per_clip"] for l in x["loader"]], "%.3f"))
    row("CPU per clip against 40 videos", lambda n, x: ratio("cpu_s_per_clip", n, x))
    row("vidfs's own CPU s per clip", lambda n, x: rng([l["vidfs_cpu_s_per_clip"] for l in x["loader"]], "%.3f"))
    row("vidfs's CPU per clip against 40 videos", lambda n, x: ratio("vidfs_cpu_s_per_clip", n, x))
    if all("frames_per_clip" in l for x in R.values() for l in x["loader"]):
        # The decode work behind a clip read (prefetch included), and what each decoded frame cost.
        row("frames decoded per clip read", lambda n, x: rng([l["frames_per_clip"] for l in x["loader"]]))
        row("vidfs's CPU per frame decoded (ms)", lambda n, x: rng([l["vidfs_cpu_s_per_frame"] for l in x["loader"]],
                                                                    "%.3f", 1000))
        row("vidfs's CPU per frame decoded against 40 videos", lambda n, x: ratio("vidfs_cpu_s_per_frame", n, x))
    row("Go heap + runtime after the loader (MiB)", lambda n, x: rng([l["go_after"] for l in x["loader"] if "go_after" in l],
                                                                    "%.0f", 1 / MiB))
    row("`Dataset[i]` of a cached sample (ms)", lambda n, x: "%.2f" % (1000 * x["item"]["item_s"]) if "item" in x else "-")
    row("`Dataset(...)` and its first item (ms)", lambda n, x: "%.0f" % (1000 * x["item"]["first_item_s"]) if "item" in x else "-")
    row("`Mount.read(i)` / raw pread (ms)", lambda n, x: "%.2f / %.2f" % (1000 * x["item"]["read_s"], 1000 * x["item"]["raw_s"])
        if "item" in x else "-")
    row("`Dataset[i]` beyond its read (ms)", lambda n, x: "%.2f" % (1000 * x["item"]["beyond_s"]) if "item" in x else "-")
    row("`PlanSampler(...)`, drawn and written (s)", lambda n, x: "%.2f" % x["plan"]["construct_s"] if "plan" in x else "-")
    row("its plan's entries", lambda n, x: format(x["plan"]["entries"], ",") if "plan" in x else "-")
    row("shown in the stats after its close (s)", lambda n, x: "%.3f" % x["plan"]["applied_after_s"] if "plan" in x else "-")
    row("`PlanSampler(...)` in the loader runs (s)", lambda n, x: rng([l["plan_sampler_s"] for l in x["loader"]], "%.2f"))
    row("plan replaced: entries, times", lambda n, x: "%s, %d" % (format(x["replace"]["entries"], ","), x["replace"]["replacements"])
        if "replace" in x else "-")
    row("its write, median (s) / shown in stats within (s)", lambda n, x: "%.2f / %.3f" % (
        x["replace"]["write_s"], x["replace"]["applied_after_s"]) if "replace" in x else "-")
    row("longest read before / while replaced (ms)", lambda n, x: "%.1f / %.1f" % (
        1000 * x["replace"]["max_before_s"], 1000 * x["replace"]["max_during_s"]) if "replace" in x else "-")
    row("99th percentile read before / while (ms)", lambda n, x: "%.1f / %.1f" % (
        1000 * x["replace"]["p99_before_s"], 1000 * x["replace"]["p99_during_s"]) if "replace" in x else "-")
    row("reads over 10 ms before / while", lambda n, x: "%d of %d / %d of %d" % (
        x["replace"]["over10ms_before"], x["replace"]["reads_before"], x["replace"]["over10ms_during"],
        x["replace"]["reads_during"]) if "replace" in x else "-")
    row("read errors while replaced", lambda n, x: "%d" % x["replace"]["errors"] if "replace" in x else "-")
    row("control, tmpfs: longest read before / while (ms)", lambda n, x: "%.1f / %.1f" % (
        1000 * x["replace"]["control_max_before_s"], 1000 * x["replace"]["control_max_during_s"])
        if "control_max_during_s" in x.get("replace", {}) else "-")
    row("control, tmpfs: 99th percentile before / while (ms)", lambda n, x: "%.1f / %.1f" % (
        1000 * x["replace"]["control_p99_before_s"], 1000 * x["replace"]["control_p99_during_s"])
        if "control_max_during_s" in x.get("replace", {}) else "-")
    a = r["args"]
    L += ["", "Resident memory is vidfs's VmRSS a moment after .vidfs/stats appears (per video and per sample: the median"
          " at N less the median at 40, over the videos or samples between; every video has 17 samples, so these two"
          " divide the same difference; the --step row separates them: the same videos mounted with 68 samples each"
          " against 17). The loader rounds each run on a fresh mount, so that every clip is a decode at both sizes."
          " The plan-replacement rows: %d reader threads (another process) pread %d cached samples for %.0f s, then"
          " for %.0f s more while plans of two epochs (those samples first; --prefetch %d, so nothing is decoded)"
          " replace one another back to back. The control rows: one more thread of the readers' process preads the same"
          " samples' bytes from a tmpfs file throughout, so that what the host's scheduling costs a read (the plan's"
          " writer and vidfs's parse share its cores) shows apart from what vidfs does." % (
              a["readers"], a["hot"], a["phase"], a["phase"], a["hot"])]
    return "\n".join(L + [""] + goals(R, sizes))


def goals(R, sizes):
    """Issue 18's goals at the largest size measured, each met or not."""
    n = sizes[-1]
    x = R[n]
    if n == SMALL:
        return []
    verdict = lambda ok: "met" if ok else "not met"

    def rounds(vals, ok):
        """A ratio goal over the rounds: met in every round, by the median only, or not."""
        if vals and all(ok(v) for v in vals):
            return "met"
        return "met by the median, not in every round" if vals and ok(med(vals)) else "not met"
    clips = [b / a for a, b in paired(R, n, "clips_per_s")]
    cpu = [b / a for a, b in paired(R, n, "cpu_s_per_clip")]
    per_video = (med(x["rss"]) - med(R[SMALL]["rss"])) / (n - SMALL)
    out = ["Goals, at %s videos (the goals are set at 240,000):" % format(n, ","), "",
           "- clips/s at least 0.95x that of 40 videos: %s (%s)." % (rounds(clips, lambda v: v >= 0.95), rng(clips, "%.2fx")),
           "- CPU per clip at most 1.05x that of 40 videos: %s (%s)." % (rounds(cpu, lambda v: v <= 1.05), rng(cpu, "%.2fx")),
           "- resident memory beyond the cache at most 1 KiB per video: %s (%.0f B)." % (verdict(per_video <= 1024), per_video)]
    if all("frames_per_clip" in l for l in R[SMALL]["loader"] + x["loader"]):
        work = [b / a for a, b in paired(R, n, "frames_per_clip")]
        per_frame = [b / a for a, b in paired(R, n, "vidfs_cpu_s_per_frame")]
        line = ("  Split, vidfs's CPU per clip is the frames decoded per clip read (%s of 40 videos') times vidfs's"
                " CPU per frame decoded (%s)." % (rng(work, "%.2fx"), rng(per_frame, "%.2fx")))
        if med(per_frame) <= 1.05 < med(work):
            line += (" The difference is in the work, not its cost: 40 videos' decoders more often find the next"
                     " clip's frames where the last clip left them, and its prefetch stops at the end of its short plan.")
        out.insert(4, line)

    if "step" in x:
        s = x["step"]
        ps = (s["4"]["rss"] - s["16"]["rss"]) / (s["4"]["samples"] - s["16"]["samples"])
        out.append("- nothing per sample: %s (%.0f B per sample, --step 4 against 16; under 16 B is taken for nothing)." % (
            verdict(ps < 16), ps))
    if "plan" in x:
        p = x["plan"]
        out.append("- `PlanSampler` draws and writes an epoch's plan in under 1 s (at 4 million samples): %s (%.2f s for %s"
                   " samples, two epochs' plan of %s entries)." % (verdict(p["construct_s"] < 1), p["construct_s"],
                                                                    format(p["samples"], ","), format(p["entries"], ",")))
    if "replace" in x:
        rp = x["replace"]
        out.append("- a plan applied within 1 s of its close: %s (%.3f s at most, plans of %s entries)." % (
            verdict(rp["applied_after_s"] <= 1), rp["applied_after_s"], format(rp["entries"], ",")))
        out.append("- no reader waits more than 10 ms while a plan is applied: %s (longest read %.1f ms while replaced,"
                   " %.1f ms before; %d errors)." % (verdict(rp["max_during_s"] <= 0.01 and not rp["errors"]),
                                                     1000 * rp["max_during_s"], 1000 * rp["max_before_s"], rp["errors"]))
        if "control_max_during_s" in rp:
            out.append("  The control, one more thread of the readers' process reading the same bytes from tmpfs, waited"
                       " up to %.1f ms meanwhile (99th percentile %.1f ms): what the host's scheduling alone costs a"
                       " read while the plans are written and parsed." % (1000 * rp["control_max_during_s"],
                                                                          1000 * rp["control_p99_during_s"]))
    return out


def paired(R, n, key):
    """(40 videos', n videos') values of the loader rounds taken in the same round against n."""
    small = [l for l in R[SMALL]["loader"] if l.get("against") == n]
    return [(a[key], b[key]) for a, b in zip(small, R[n]["loader"])]


def chart(r, path):
    """Videos on a log axis; CPU per clip (and vidfs's part) and resident memory per video."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    R = {int(k): v for k, v in r["results"].items()}
    sizes = sorted(R)
    fig, ax = plt.subplots(1, 2, figsize=(12, 4.5))
    for key, label, color in [("cpu_s_per_clip", "trainer + workers + vidfs", "tab:blue"),
                              ("vidfs_cpu_s_per_clip", "vidfs alone", "tab:orange")]:
        med_ = [med([l[key] for l in R[n]["loader"]]) for n in sizes]
        lo = [m - min(l[key] for l in R[n]["loader"]) for m, n in zip(med_, sizes)]
        hi = [max(l[key] for l in R[n]["loader"]) - m for m, n in zip(med_, sizes)]
        ax[0].errorbar(sizes, med_, yerr=[lo, hi], marker="o", label=label, color=color, capsize=3)
    base = med([l["cpu_s_per_clip"] for l in R[SMALL]["loader"]])
    ax[0].axhline(1.05 * base, color="k", ls="--", lw=1, label="goal: 1.05x of 40 videos")
    dress(ax[0], "videos (17 samples each)", "CPU s per clip", "CPU per clip (DataLoader, 2 workers, batch 8)")
    big = [n for n in sizes if n != SMALL]
    per = [(med(R[n]["rss"]) - med(R[SMALL]["rss"])) / (n - SMALL) for n in big]
    ax[1].plot(big, per, marker="o", color="tab:green", label="resident after mount, beyond 40 videos'")
    ax[1].axhline(1024, color="k", ls="--", lw=1, label="goal: 1 KiB per video")
    dress(ax[1], "videos", "bytes per video", "vidfs's memory per video")
    fig.tight_layout()
    fig.savefig(path, dpi=80)


def dress(a, xlabel, ylabel, title):
    """A panel of the chart: videos on a log axis, values from 0."""
    a.set_xscale("log")
    a.set_ylim(bottom=0)
    a.set_xlabel(xlabel)
    a.set_ylabel(ylabel)
    a.set_title(title)
    a.legend(fontsize=8)


def write_doc(doc, text):
    cur = open(doc).read()
    section = "<!-- scale:begin -->\n## Scale (issue 18, bench/scale.py)\n\n![CPU per clip and memory per video against the number" \
              " of videos](benchmarks-scale.png)\n\n" + text + "\n<!-- scale:end -->"
    pat = re.compile(r"<!-- scale:begin -->.*?<!-- scale:end -->", re.S)
    cur = pat.sub(lambda m: section, cur) if pat.search(cur) else cur.rstrip("\n") + "\n\n" + section + "\n"
    open(doc, "w").write(cur)


def render(r, doc):
    text = table(r)
    print(text)
    if doc:
        write_doc(doc, text)
        chart(r, os.path.join(os.path.dirname(doc), "benchmarks-scale.png"))


def main():
    if len(sys.argv) > 1 and sys.argv[1] in ("loader", "item", "plan"):
        mode, args = sys.argv[1], sys.argv[2:]
        if mode == "loader":
            r = loader_child(args[0], int(args[1]), int(args[2]), int(args[3]), int(args[4]))
        elif mode == "item":
            r = item_child(args[0], int(args[1]))
        else:
            r = plan_child(args[0])
        print(json.dumps(r))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000", help="videos, comma-separated (40 is always measured)")
    ap.add_argument("--large", action="store_true", help="add 100,000 and 240,000 videos")
    ap.add_argument("--rounds", type=int, default=3, help="DataLoader rounds per size, taking turns with 40 videos")
    ap.add_argument("--batches", type=int, default=40, help="batches of 8 counted per DataLoader run")
    ap.add_argument("--warm", type=int, default=5, help="batches read before counting")
    ap.add_argument("--item-reps", type=int, default=30)
    ap.add_argument("--readers", type=int, default=3, help="reader threads while plans are replaced")
    ap.add_argument("--hot", type=int, default=32, help="cached samples those readers read")
    ap.add_argument("--phase", type=float, default=10, help="seconds of reading before, and while, plans are replaced")
    ap.add_argument("--cold", action="store_true", help="measure the first mount at every size (an empty probe cache)")
    ap.add_argument("--cold-max", type=int, default=20000, help="measure the first mount up to this size on every run")
    ap.add_argument("--per-sample-max", type=int, default=10000, help="the --step 4 mount up to this size")
    ap.add_argument("--doc", help="write the section into this benchmarks.md (and its chart beside it)")
    ap.add_argument("--from", dest="saved", help="re-render an earlier run's results (its JSON)")
    a = ap.parse_args()
    if a.saved:
        render(json.load(open(a.saved)), a.doc)
        return
    sizes = sorted({SMALL} | {int(s.replace("_", "")) for s in a.sizes.split(",") if s} |
                   ({100000, 240000} if a.large else set()))
    began = time.time()
    srcs = {n: source(n) for n in sizes}
    res = {}
    for n in sizes:
        res[n] = mount_times(n, srcs[n], a.cold or n <= a.cold_max)
        res[n].update({"remount_s": [], "rss": [], "mem_parts": [], "loader": []})
        if "first_s" in res[n]:
            log("%6d videos: first mount %.2f s (%s), RSS %.0f MiB" % (n, res[n]["first_s"], res[n]["first_ready_in"],
                                                                       res[n]["rss_first"] / MiB))
        if n <= a.per_sample_max:
            res[n]["step"] = per_sample_rss(n, srcs[n])
    rounds(sizes, srcs, a, res)
    # Which larger size each 40-video loader run was taken against, for the ratios.
    k = 0
    for r in range(a.rounds):
        for n in sizes[1:]:
            res[SMALL]["loader"][k]["against"] = n
            k += 1
    for n in sizes:
        extras(n, srcs[n], a, res)
    out = {"began": began, "machine": run.machine(), "sizes": sizes, "args": vars(a), "results": res,
           "minutes": (time.time() - began) / 60}
    saved = os.path.join(CACHE, "results-%s.json" % time.strftime("%Y%m%d-%H%M%S", time.localtime(began)))
    json.dump(out, open(saved, "w"), indent=1)
    log("results saved in %s (--from re-renders them); %.0f minutes" % (saved, out["minutes"]))
    render(json.loads(json.dumps(out)), a.doc)


if __name__ == "__main__":
    main()
