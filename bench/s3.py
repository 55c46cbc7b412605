#!/usr/bin/python3
"""Videos in object storage (issue 21): vidfs reading a bucket, against s3fs-fuse and local disk.

The S3 server is versitygw (built by scripts/setup.sh bench into ~/.cache/vidfs/versitygw) behind
s3test's proxy (internal/s3test/s3serve), which adds a round trip's latency before every request
and caps the bandwidth of all answers together. Two datasets are uploaded into one bucket:
  small/: make bench's dataset (bench/dataset.sh: 200 H.264 videos, each under 1 MiB, so that one
          1 MiB block holds a whole video);
  large/: 4 longer H.264 videos (Megamind.avi looped 4 times, 1280x720, x264 veryfast CRF 18,
          GOP 48: 6.7-11.5 MB each), made once into ~/.cache/vidfs/bench/s3-large-v1, where a sample's
          GOP is a small part of its video.
Every mount is `--frames 16 --stride 2 --size 112x112 --workers 2 --cache-mem 256MiB`; each run
is a fresh mount (and a fresh s3fs mount), made with no added latency (from a probe cache filled
by a first mount), the latency set only once it is up.

For each dataset, the step: the batches/s of local disk flat out (a DataLoader over vidfs.Dataset,
2 workers, batch 8), and a training step per batch of batch/(--pace x that rate). Then, for each
round, at each latency (20 and 100 ms), contenders take turns, each a DataLoader (2 workers,
batch 8) paced by that step, --batches batches after one:
  local:     vidfs over the same files on local disk (the page cache warm), with a plan;
  s3-plan:   vidfs mount s3://bench/DATASET, with a plan (vidfs.PlanSampler);
  s3-noplan: the same, without a plan (a shuffled list of the samples);
  s3fs-plan: vidfs over s3fs-fuse (Debian's s3fs, its default options, the bucket through the
             proxy), with a plan.
Reported: clips/s; the trainer's wait (time blocked in next(loader), beyond the step), as a share
of wall time, the first batch (the DataLoader's workers starting, the first fetches) apart; GETs
and bytes fetched per sample decoded (vidfs's .vidfs/stats fetch section; for s3fs, the proxy's
count of object GETs and the bytes of their answers); the GOP bytes a sample needs (ffprobe's
packets: from the sample's keyframe to the furthest packet in decode order up to its last
frame's), averaged over the samples read; CPU seconds per clip of the trainer, its workers, vidfs
and s3fs (not the server's or the proxy's).
Prints a table and saves the results as JSON (--from re-renders them); --doc writes the section
between the s3 markers of docs/benchmarks.md.
"""
import argparse
import bisect
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))
import run  # noqa: E402  (machine(), log(), CACHE)
from scale import cpu_seconds, live_children  # noqa: E402
import vidfs  # noqa: E402

CACHE = os.path.join(run.CACHE, "s3")
SPEC = ["--frames", "16", "--stride", "2", "--size", "112x112", "--workers", "2", "--cache-mem", "256MiB"]
FRAMES, STRIDE = 16, 2
BATCH = 8
CONTENDERS = ["local", "s3-plan", "s3-noplan", "s3fs-plan"]
NAMES = {"local": "local disk, plan", "s3-plan": "vidfs on the bucket, plan",
         "s3-noplan": "vidfs on the bucket, no plan", "s3fs-plan": "vidfs over s3fs-fuse, plan"}
BUCKET = "bench"
KEYS = ("vidfs-test", "vidfs-test-secret")  # internal/s3test's root user
PY = "/usr/bin/python3"
log = run.log


def large_dataset():
    """4 longer videos, 1280x720, 5-12 MB each (made once)."""
    d = os.path.join(run.CACHE, "s3-large-v1")
    if os.path.exists(os.path.join(d, ".complete")):
        return d
    os.makedirs(os.path.join(d, "megamind-720p"), exist_ok=True)
    log("large: encoding 4 videos into %s" % d)
    for k in range(4):
        vf = "scale=1280:720" + (",hflip" if k % 2 else "")
        subprocess.run(["nice", "ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-y", "-stream_loop", "3",
                        "-ss", str(2 * k), "-i", "/usr/share/doc/opencv-doc/examples/data/Megamind.avi", "-an",
                        "-vf", vf, "-c:v", "libx264", "-preset", "veryfast", "-crf", "18", "-g", "48",
                        "-keyint_min", "48", "-sc_threshold", "0", "-pix_fmt", "yuv420p",
                        os.path.join(d, "megamind-720p", "long%d.mp4" % k)], check=True)
    open(os.path.join(d, ".complete"), "w").close()
    return d


def gop_table(src, rel):
    """A video's packets in decode order as (pts, pos, end, key), from Debian's ffprobe."""
    out = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
                          "packet=pts,pos,size,flags", "-of", "compact=p=0", os.path.join(src, rel)],
                         check=True, capture_output=True, text=True).stdout
    pk = []
    for line in out.split():
        f = dict(kv.split("=", 1) for kv in line.split("|"))  # ffprobe's order of fields, not the asked one
        pk.append((int(f["pts"]), int(f["pos"]), int(f["pos"]) + int(f["size"]), "K" in f["flags"]))
    return pk


def sample_range(packets, start):
    """The bytes [a, b) from the keyframe at or before frame start to the furthest packet needed
    for frame start + (FRAMES-1)*STRIDE: every packet in decode order from the keyframe until the
    last one whose pts is at most that frame's."""
    frames = sorted(p[0] for p in packets)
    last = frames[min(start + (FRAMES - 1) * STRIDE, len(frames) - 1)]
    first = frames[start]
    k = max(i for i, p in enumerate(packets) if p[3] and p[0] <= first)
    upto = max(i for i, p in enumerate(packets) if p[0] <= last)
    span = packets[k:upto + 1]
    return [packets[k][1], max(p[2] for p in span)]


def gop_file(src):
    return os.path.join(CACHE, "gop-v3-%s.json" % os.path.basename(src.rstrip("/")))


def needed_bytes(src, mnt):
    """Each sample's bytes [video, a, b) (its index.csv's), cached by the source's path."""
    path = gop_file(src)
    if os.path.exists(path):
        return json.load(open(path))
    tables, need = {}, []
    for line in open(os.path.join(mnt, "index.csv")).read().splitlines()[1:]:
        f = line.split(",")
        video, start = f[2], int(f[3])
        if video not in tables:
            tables[video] = gop_table(src, video)
        need.append([video, *sample_range(tables[video], start)])
    json.dump(need, open(path, "w"))
    return need


class Server:
    """bin/s3serve: versitygw with the datasets uploaded, behind the proxy."""

    def __init__(self, dirs):
        os.makedirs(CACHE, exist_ok=True)
        self.proc = subprocess.Popen([os.path.join(ROOT, "bin", "s3serve"), "-dir", CACHE, "-bucket", BUCKET,
                                      *("%s=%s/" % (d, p) for p, d in dirs.items())],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     stderr=open(os.path.join(CACHE, "s3serve.log"), "w"))
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit("s3serve did not start; see %s" % os.path.join(CACHE, "s3serve.log"))
        self.urls = json.loads(line)

    def ask(self, cmd):
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(60)


def wait_for(path, proc, what, logpath):
    t0 = time.time()
    while not os.path.exists(path):
        if proc.poll() is not None:
            raise SystemExit("%s exited; see %s" % (what, logpath))
        if time.time() - t0 > 600:
            raise SystemExit("%s did not come up in 10 minutes; see %s" % (what, logpath))
        time.sleep(0.05)


class Mounted:
    """A vidfs mount of SOURCE (a local path or an s3:// URL) on CACHE/mnt-NAME."""

    def __init__(self, source, name, extra=()):
        self.source, self.name, self.extra = source, name, list(extra)

    def __enter__(self):
        self.dir = os.path.join(CACHE, "mnt-" + self.name)
        os.makedirs(self.dir, exist_ok=True)
        subprocess.run(["fusermount3", "-u", "-z", self.dir], stderr=subprocess.DEVNULL)
        self.logpath = os.path.join(CACHE, "mount-%s.log" % self.name)
        self.log = open(self.logpath, "w")
        env = dict(os.environ, AWS_ACCESS_KEY_ID=KEYS[0], AWS_SECRET_ACCESS_KEY=KEYS[1], AWS_REGION="us-east-1",
                   AWS_EC2_METADATA_DISABLED="true", AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull)
        self.proc = subprocess.Popen(["nice", os.path.join(ROOT, "bin", "vidfs"), "mount", self.source, self.dir, *SPEC,
                                      "--probe-cache", os.path.join(CACHE, "probe-" + self.name), *self.extra],
                                     stderr=self.log, env=env)
        wait_for(os.path.join(self.dir, ".vidfs", "stats"), self.proc, "vidfs mount", self.logpath)
        return self

    def stats(self):
        with open(os.path.join(self.dir, ".vidfs", "stats")) as f:
            return json.load(f)

    def __exit__(self, *exc):
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(60)
        self.log.close()


class S3fs:
    """s3fs-fuse mount of the bucket through the proxy (path style, the same keys), its default
    options otherwise; its files' attributes read once, with no added latency."""

    def __init__(self, endpoint):
        self.endpoint = endpoint

    def __enter__(self):
        self.dir = os.path.join(CACHE, "mnt-s3fs-bucket")
        os.makedirs(self.dir, exist_ok=True)
        subprocess.run(["fusermount3", "-u", "-z", self.dir], stderr=subprocess.DEVNULL)
        pw = os.path.join(CACHE, "s3fs-passwd")
        with open(os.open(pw, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            f.write("%s:%s\n" % KEYS)
        self.logpath = os.path.join(CACHE, "s3fs.log")
        self.proc = subprocess.Popen(["nice", "s3fs", BUCKET, self.dir, "-f", "-o", "url=" + self.endpoint,
                                      "-o", "use_path_request_style", "-o", "passwd_file=" + pw,
                                      "-o", "endpoint=us-east-1"], stderr=open(self.logpath, "w"))
        t0 = time.time()
        while not os.path.ismount(self.dir):
            if self.proc.poll() is not None or time.time() - t0 > 60:
                raise SystemExit("s3fs did not mount; see %s" % self.logpath)
            time.sleep(0.05)
        for d, _, files in os.walk(self.dir):
            for f in files:
                os.stat(os.path.join(d, f))
        return self

    def __exit__(self, *exc):
        subprocess.run(["fusermount3", "-u", self.dir], check=False)
        self.proc.wait(60)


# ---- the trainer, run in a child process: python3 bench/s3.py --child MNT PLAN STEP BATCHES ----

def child(mnt, plan, step, batches, seed):
    import torch
    torch.set_num_threads(1)
    m = vidfs.Mount(mnt)
    if plan:
        order = vidfs.PlanSampler(m, seed=seed, epochs=1)
        read = order.order()
    else:
        read = list(range(len(m)))
        random.Random(seed).shuffle(read)
        order = read
    loader = torch.utils.data.DataLoader(vidfs.Dataset(m), batch_size=BATCH, num_workers=2, sampler=order)
    c0 = os.times()
    t0 = time.perf_counter()
    it = iter(loader)
    next(it)
    first = time.perf_counter() - t0
    time.sleep(step)
    w0, waited, clips = time.perf_counter(), 0.0, 0
    for _ in range(batches):
        t = time.perf_counter()
        clips += next(it)[0].shape[0]
        waited += time.perf_counter() - t
        time.sleep(step)
    wall = time.perf_counter() - w0
    kids = sum(cpu_seconds(p) for p in live_children())
    c1 = os.times()
    del it
    return {"first_batch_s": first, "seconds": wall, "clips": clips, "waited_s": waited,
            "trainer_cpu_s": c1.user + c1.system - c0.user - c0.system + kids,
            "read": [int(i) for i in read]}


# ---- the benchmark ----

def trainer(mnt, plan, step, batches, seed, others):
    """Runs the child; adds the CPU of the processes in others (pids) over its run."""
    c0 = sum(cpu_seconds(p) for p in others)
    out = subprocess.run(["nice", PY, os.path.abspath(__file__), "--child", mnt, str(int(plan)), "%.4f" % step,
                          str(batches), str(seed)], check=True, capture_output=True, text=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    r["others_cpu_s"] = sum(cpu_seconds(p) for p in others) - c0
    return r


def one(contender, dataset, src, server, latency, step, batches, seed):
    """One paced run of contender on dataset at latency (ms); every mount made with none added."""
    server.ask("latency 0s")
    url = "s3://%s/%s" % (BUCKET, dataset)
    s3 = ["--s3-endpoint", server.urls["proxy"], "--s3-path-style"]

    def measure(m, others):
        s0, p0 = m.stats(), server.ask("counts")
        server.ask("latency %dms" % latency)
        r = trainer(m.dir, contender != "s3-noplan", step, batches, seed, [m.proc.pid, *others])
        s1, p1 = m.stats(), server.ask("counts")
        server.ask("latency 0s")
        r["decoded"] = s1["decode"]["clips"] - s0["decode"]["clips"]
        r["proxy_gets"] = p1["object_gets"] - p0["object_gets"]
        r["proxy_bytes"] = p1["bytes"] - p0["bytes"]
        if s1.get("fetch"):
            f0, f1 = s0["fetch"], s1["fetch"]
            for k in ("gets", "bytes_fetched", "fetch_seconds", "block_hits", "block_waits", "block_misses",
                      "blocks_ahead", "retries"):
                r["fetch_" + k] = f1[k] - f0[k]
        r["hit_rate"] = s1["cache"]["hit_rate"]
        return r

    if contender == "local":
        with Mounted(src, "local-" + dataset) as m:
            return measure(m, [])
    if contender in ("s3-plan", "s3-noplan"):
        with Mounted(url, "s3-" + dataset, s3) as m:
            return measure(m, [])
    with S3fs(server.urls["proxy"]) as fs:
        with Mounted(os.path.join(fs.dir, dataset), "s3fs-" + dataset) as m:
            return measure(m, [fs.proc.pid])


def distinct(need, samples):
    """The bytes the samples need, each byte counted once: the union of their ranges."""
    by = {}
    for i in samples:
        v, a, b = need[i]
        by.setdefault(v, []).append((a, b))
    total = 0
    for rs in by.values():
        end = -1
        for a, b in sorted(rs):
            a = max(a, end)
            if b > a:
                total += b - a
            end = max(end, b)
    return total


def gops(need, r):
    """The mean GOP bytes of the samples read, and the distinct bytes needed by the samples decoded
    (the first of the order: a plan decodes in its order; without, the decodes are the reads)."""
    read = r["read"]
    gop = statistics.mean(need[i][2] - need[i][1] for i in read[:r["clips"] + BATCH])
    return gop, distinct(need, read[:max(r["decoded"], 1)])


def summarize(r, gop, needed):
    """The run's figures; gop: the mean GOP bytes of the samples it read; needed: the distinct
    bytes the samples it decoded need."""
    clips = r["clips"]
    dec = max(r["decoded"], 1)
    if "fetch_gets" in r:
        gets, byts = r["fetch_gets"], r["fetch_bytes_fetched"]
    else:
        gets, byts = r["proxy_gets"], r["proxy_bytes"]
    wall = r["seconds"]
    return {"clips_per_s": clips / wall, "wait_fraction": r["waited_s"] / wall, "first_batch_s": r["first_batch_s"],
            "gets_per_sample": gets / dec, "bytes_per_sample": byts / dec, "gop_bytes": gop,
            "bytes_over_gop": (byts / dec) / gop if gop else 0, "needed_per_sample": needed / dec,
            "bytes_over_needed": byts / needed if needed else 0,
            "cpu_s_per_clip": (r["trainer_cpu_s"] + r["others_cpu_s"]) / clips, "decoded": r["decoded"],
            "decoded_per_read": r["decoded"] / clips}


def rng(vals, fmt, scale=1):
    vals = sorted(v * scale for v in vals)
    if len(vals) == 1 or fmt % vals[0] == fmt % vals[-1]:
        return fmt % vals[0]
    return (fmt + "-" + fmt) % (vals[0], vals[-1])


def table(res, dataset):
    rows = ["| round trip | contender | clips/s | trainer waited | first batch (s) | GETs per sample | "
            "bytes fetched per sample | GOP bytes a sample needs | fetched / GOP | distinct bytes needed per sample | fetched / distinct needed | CPU s per clip | clips decoded per clip read |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for lat in res["latencies"]:
        for c in CONTENDERS:
            s = [x for x in res["runs"] if x["dataset"] == dataset and x["latency"] == lat and x["contender"] == c]
            if not s:
                continue
            g = lambda k: [x["summary"][k] for x in s]  # noqa: E731
            gets = "" if c == "local" else rng(g("gets_per_sample"), "%.2f")
            byts = "" if c == "local" else rng(g("bytes_per_sample"), "%.0f", 1e-3) + " KB"
            over = "" if c == "local" else rng(g("bytes_over_gop"), "%.2f") + "x"
            dist = "" if c == "local" else rng(g("needed_per_sample"), "%.0f", 1e-3) + " KB"
            over2 = "" if c == "local" else rng(g("bytes_over_needed"), "%.2f") + "x"
            rows.append("| %d ms | %s | %s | %s %% | %s | %s | %s | %s KB | %s | %s | %s | %s | %s |" % (
                lat, NAMES[c], rng(g("clips_per_s"), "%.1f"), rng(g("wait_fraction"), "%.1f", 100),
                rng(g("first_batch_s"), "%.2f"), gets, byts, rng(g("gop_bytes"), "%.0f", 1e-3), over, dist, over2,
                rng(g("cpu_s_per_clip"), "%.3f"), rng(g("decoded_per_read"), "%.2f")))
    return "\n".join(rows)


def goals(res):
    out = []
    for ds in res["datasets"]:
        loc = [x["summary"]["wait_fraction"] for x in res["runs"] if x["dataset"] == ds and x["contender"] == "local"
               and x["latency"] == 100]
        s3 = [x["summary"]["wait_fraction"] for x in res["runs"] if x["dataset"] == ds and x["contender"] == "s3-plan"
              and x["latency"] == 100]
        pairs = {}
        for x in res["runs"]:
            if x["dataset"] == ds and x["latency"] == 100 and x["contender"] in ("local", "s3-plan"):
                pairs.setdefault(x["round"], {})[x["contender"]] = x["summary"]["wait_fraction"]
        per_round = ", ".join("%+.1f" % (100 * (p["s3-plan"] - p["local"])) for _, p in sorted(pairs.items())
                              if len(p) == 2)
        if loc and s3:
            d = statistics.median(s3) - statistics.median(loc)
            out.append("- %s, with a plan at 100 ms: the trainer waited %.1f %% of wall time (%s) against %.1f %% on "
                       "local disk (%s): medians **%+.1f points** (each round, taking turns: %s); the goal is at most 2 points "
                       "more: **%s** by the medians%s." % (
                           ds, 100 * statistics.median(s3), rng(s3, "%.1f", 100), 100 * statistics.median(loc),
                           rng(loc, "%.1f", 100), 100 * d, per_round, "met" if d <= 0.02 else "not met",
                           "" if all(p["s3-plan"] - p["local"] <= 0.02 for p in pairs.values() if len(p) == 2)
                           else ", not in every round"))
        runs = [x for x in res["runs"] if x["dataset"] == ds and x["contender"] == "s3-plan" and x["latency"] == 100]
        if runs:
            t = lambda k: sum(x.get("fetch_" + k, 0) for x in runs)  # noqa: E731
            gets = max(t("gets"), 1)
            out.append("  The fetch stats of those runs (summed): %d GETs of %.0f KB each on average, %.0f ms a GET "
                       "(retries included); the decoders asked for 1 MiB blocks %d times: %d in memory already, %d on "
                       "their way, %d fetched for the asking; %d blocks fetched ahead in the plan's order; %d "
                       "retries." % (t("gets"), t("bytes_fetched") / gets / 1e3, 1000 * t("fetch_seconds") / gets,
                                     t("block_hits") + t("block_waits") + t("block_misses"), t("block_hits"),
                                     t("block_waits"), t("block_misses"), t("blocks_ahead"), t("retries")))
            asks = max(t("block_hits") + t("block_waits") + t("block_misses"), 1)
            out.append("  So the decoders waited on a GET for %.1f %% of their block asks: where the trainer waited "
                       "more than on local disk, it was not for bytes from the bucket." % (
                           100 * (t("block_waits") + t("block_misses")) / asks))
        sel = [x["summary"] for x in res["runs"] if x["dataset"] == ds and x["contender"] == "s3-plan"]
        if sel:
            ov = [x["bytes_over_needed"] for x in sel]
            out.append("- %s, with a plan: the bytes fetched were %s the bytes the samples decoded need (their GOPs' "
                       "packets, each byte once; per sample, %s the mean GOP bytes of a sample); the goal is at most "
                       "1.5x: **%s**." % (ds, rng(ov, "%.2f") + "x", rng([x["bytes_over_gop"] for x in sel], "%.2f") + "x",
                                         "met" if max(ov) <= 1.5 else "not met"))
            if max(ov) > 1.5:
                runs = [x for x in res["runs"] if x["dataset"] == ds and x["contender"] == "s3-plan"]
                gets = max(sum(x["fetch_gets"] for x in runs), 1)
                out.append("  Why: a GET fetches whole 1 MiB blocks, here %.0f KB a GET on average (a whole video, "
                           "where one is smaller than a block), of which the samples decoded need %s KB each "
                           "(distinct bytes); the rest is other samples' GOPs and the container's index." % (
                               sum(x["fetch_bytes_fetched"] for x in runs) / gets / 1e3,
                               rng([x["summary"]["needed_per_sample"] for x in runs], "%.0f", 1e-3)))
    return "\n".join(out)


def section(res):
    m = res["machine"]
    steps = ", ".join("%s %.0f ms (%.1f clips/s; local disk flat out %.1f clips/s)" % (
        ds, 1000 * res["steps"][ds], BATCH / res["steps"][ds], res["flat"][ds]) for ds in res["datasets"])
    parts = ["<!-- s3:begin -->", "## Object storage (issue 21)", "",
             "Measured %s on %s, by `make bench-s3` (`bench/s3.py`, %d minutes, %d rounds taking turns, "
             "%d paced batches of %d after the first in each run). versitygw v1.8.0 on the same machine behind "
             "s3test's proxy (`internal/s3test/s3serve`), which adds the round trip before every request and "
             "caps all answers together at %.0f MB/s. Every mount: `%s`, fresh for each run; s3fs-fuse %s with its "
             "default options (no disk cache), remounted for each run. A DataLoader over `vidfs.Dataset`, 2 "
             "workers, batch %d, a training step per batch that local disk meets: %s. Ranges are over the rounds; "
             "the trainer's wait is its time blocked in `next(loader)` as a share of the wall time, the first "
             "batch (the workers starting, the first fetches) apart; bytes and GETs are per sample decoded "
             "(vidfs's `.vidfs/stats` fetch section; for s3fs, the proxy's count); the GOP bytes a sample needs "
             "are from its keyframe to its last frame's packets (ffprobe), averaged over the samples read; CPU "
             "counts the trainer, its workers, vidfs and s3fs, not the server or the proxy." % (
                 res["date"], m, res["minutes"], res["rounds"], res["batches"], BATCH, res["bandwidth"] / 1e6,
                 " ".join(SPEC), res.get("s3fs_version", ""), BATCH, steps)]
    for ds in res["datasets"]:
        parts += ["", "### %s" % res["describe"][ds], "", table(res, ds)]
    parts += ["", "Reading the tables: on the small videos one GET of a 1 MiB block fetches a whole video, so the "
              "bytes fetched per sample are a video's bytes over the samples of it decoded in the run (a short run "
              "decodes few of each video's samples). With a plan, vidfs decodes (and fetches) ahead of the reader, "
              "so a short run counts more clips decoded than read, and their CPU, against the clips read: the last "
              "column says how many. The machine is shared with other work (its load was well above its 2 cores "
              "during the run), so the trainer's wait includes waiting for a core."]
    parts += ["", "### Against the goals", "", goals(res), "", "<!-- s3:end -->"]
    return "\n".join(parts)


def write_doc(doc, text):
    body = open(doc).read()
    pat = re.compile(r"<!-- s3:begin -->.*?<!-- s3:end -->", re.S)
    if pat.search(body):
        body = pat.sub(lambda _: text, body)
    else:
        old = re.compile(r"## Object storage \(issue 21\): counts only.*?(?=\n## |\Z)", re.S)
        body = old.sub(lambda _: text + "\n", body) if old.search(body) else body.rstrip("\n") + "\n\n" + text + "\n"
    open(doc, "w").write(body)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        mnt, plan, step, batches, seed = sys.argv[2:7]
        print(json.dumps(child(mnt, plan == "1", float(step), int(batches), int(seed))))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--batches", type=int, default=20, help="paced batches counted in each run, after the first (few batches overstate bytes a sample: what was fetched ahead for samples not yet read is counted against those read)")
    ap.add_argument("--latencies", default="20,100", help="added round trips, ms")
    ap.add_argument("--bandwidth", type=float, default=50e6, help="bytes a second, all answers together")
    ap.add_argument("--pace", type=float, default=0.6, help="the step: local disk's flat-out rate times this")
    ap.add_argument("--datasets", default="small,large")
    ap.add_argument("--json", default=os.path.join(CACHE, "results.json"))
    ap.add_argument("--from", dest="from_json", help="re-render saved results")
    ap.add_argument("--doc", help="write the section into this file (docs/benchmarks.md)")
    a = ap.parse_args()
    if a.from_json:
        res = json.load(open(a.from_json))
        srcs = sources()
        need = {ds: json.load(open(gop_file(srcs[ds]))) for ds in res["datasets"] if os.path.exists(gop_file(srcs[ds]))}
        for r in res["runs"]:
            r["summary"] = summarize(r, *gops(need[r["dataset"]], r))
    else:
        res = measure(a)
        json.dump(res, open(a.json, "w"), indent=1)
    text = section(res)
    print(text)
    if a.doc:
        write_doc(a.doc, text)


def sources(make=False):
    """The datasets' directories (made first, with make)."""
    small = os.path.join(run.CACHE, "dataset-v1")
    if make:
        subprocess.run([os.path.join(HERE, "dataset.sh"), small], check=True)
        return {"small": small, "large": large_dataset()}
    return {"small": small, "large": os.path.join(run.CACHE, "s3-large-v1")}


def measure(a):
    began = time.time()
    os.makedirs(CACHE, exist_ok=True)
    srcs = sources(make=True)
    datasets = a.datasets.split(",")
    srcs = {d: srcs[d] for d in datasets}
    latencies = [int(x) for x in a.latencies.split(",")]
    ver = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "s3fs"], capture_output=True, text=True).stdout
    res = {"date": time.strftime("%Y-%m-%d"), "machine": run.machine(), "rounds": a.rounds, "batches": a.batches,
           "bandwidth": a.bandwidth, "latencies": latencies, "datasets": datasets, "s3fs_version": ver,
           "describe": {"small": "make bench's dataset: 200 videos, each under 1 MiB (a block holds a whole video)",
                        "large": "4 longer videos, 1280x720, 6.7-11.5 MB each (a sample's GOP is a small part of its video)"},
           "steps": {}, "flat": {}, "runs": []}
    log("s3: starting versitygw and the proxy, uploading %s" % ", ".join(datasets))
    server = Server(srcs)
    try:
        server.ask("bandwidth %d" % a.bandwidth)
        need = {}
        for ds in datasets:
            # The first mounts of each kind probe (no added latency) and fill their probe caches.
            with Mounted(srcs[ds], "local-" + ds) as m:
                need[ds] = needed_bytes(srcs[ds], m.dir)
                flat = trainer(m.dir, True, 0.0, a.batches, 99, [m.proc.pid])
            with Mounted("s3://%s/%s" % (BUCKET, ds), "s3-" + ds,
                         ["--s3-endpoint", server.urls["proxy"], "--s3-path-style"]):
                pass
            with S3fs(server.urls["proxy"]) as fs:
                with Mounted(os.path.join(fs.dir, ds), "s3fs-" + ds):
                    pass
            rate = flat["clips"] / flat["seconds"]
            res["flat"][ds] = rate
            res["steps"][ds] = BATCH / (a.pace * rate)
            log("s3: %s: local disk flat out %.1f clips/s; step %.0f ms a batch" % (ds, rate, 1000 * res["steps"][ds]))
        for rnd in range(a.rounds):
            for ds in datasets:
                for lat in latencies:
                    for c in CONTENDERS:
                        r = one(c, ds, srcs[ds], server, lat, res["steps"][ds], a.batches, rnd)
                        r["summary"] = s = summarize(r, *gops(need[ds], r))
                        res["runs"].append({"dataset": ds, "latency": lat, "contender": c, "round": rnd, **r})
                        log("s3: round %d %-5s %3d ms %-9s %5.1f clips/s, waited %5.1f %%, first %.2f s, "
                            "%.2f GETs %.0f KB a sample (GOP %.0f KB, %.2fx), %.3f CPU s/clip" % (
                                rnd, ds, lat, c, s["clips_per_s"], 100 * s["wait_fraction"], s["first_batch_s"],
                                s["gets_per_sample"], s["bytes_per_sample"] / 1e3, s["gop_bytes"] / 1e3,
                                s["bytes_over_gop"], s["cpu_s_per_clip"]))
    finally:
        server.close()
    res["minutes"] = round((time.time() - began) / 60)
    return res


if __name__ == "__main__":
    main()
