#!/usr/bin/python3
"""Decoders in sandboxed helpers against decoders in the mount's own process (issue 41).

For each dataset (bench/dataset10.sh's 24 H.264 videos at 480p with B-frames, and its 8 at 1080p,
cached in ~/.cache/vidfs/bench), and each round, taking turns (isolated first in even rounds):
  1. vidfs mount DATA MNT --frames 16 --stride 2 --step 4 --size 224x224 --workers 2
     --cache-mem 1GiB --decoders MODE (probe tables from a cache the first mount made);
  2. a plan of N samples drawn at random (the same N for both modes in a round) is written to
     .vidfs/order, and 2 reader threads read them in its order through clips.raw: every read is
     a decode, ahead of the readers or on their miss;
  3. clips/s is N over the reading's wall time; CPU per clip is the mount's whole CPU time (user
     and system, its helpers' included: they are its children, reaped before it exits), from the
     start of the mount to its exit, over N; resident memory per helper is read from
     .vidfs/stats at the end of the reading.
Then, once, the time to replace a dead helper: a helper of an idle isolated mount is killed
(SIGKILL) and .vidfs/stats polled until a new one serves (replace_seconds), 5 times.
Prints Markdown: each mode's figures (median, min-max) and the ratios isolated / in-process pair by
pair (median, min-max).
"""
import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from run import machine  # noqa: E402

CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "vidfs", "bench")
SPEC = ["--frames", "16", "--stride", "2", "--step", "4", "--size", "224x224", "--workers", "2", "--cache-mem", "1GiB"]
MODES = ("isolated", "in-process")


class Mount:
    def __init__(self, data, probe, mode, tmp):
        self.dir = tempfile.mkdtemp(dir=tmp)
        self.log = open(os.path.join(tmp, "mount-%s.log" % mode), "a")
        self.proc = subprocess.Popen([os.path.join(ROOT, "bin", "vidfs"), "mount", data, self.dir, *SPEC,
                                      "--probe-cache", probe, "--decoders", mode], stdout=self.log, stderr=self.log)
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
        """Unmounts; returns the CPU seconds of the mount and its reaped children."""
        subprocess.run([os.path.join(ROOT, "bin", "vidfs"), "umount", self.dir], check=True, capture_output=True)
        _, status, ru = os.wait4(self.proc.pid, 0)
        self.proc.returncode = status
        self.log.close()
        os.rmdir(self.dir)
        return ru.ru_utime + ru.ru_stime


def read_plan(mnt, plan, sample_bytes, readers):
    with open(os.path.join(mnt, ".vidfs", "order"), "w") as f:
        f.write(" ".join(map(str, plan)))
    fd = os.open(os.path.join(mnt, "clips.raw"), os.O_RDONLY)
    errors = []

    def read(k):
        for i in plan[k::readers]:
            try:
                if len(os.pread(fd, sample_bytes, i * sample_bytes)) != sample_bytes:
                    errors.append(i)
            except OSError:
                errors.append(i)
    began = time.monotonic()
    ts = [threading.Thread(target=read, args=(k,)) for k in range(readers)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    took = time.monotonic() - began
    os.close(fd)
    if errors:
        raise SystemExit("%d samples failed, e.g. %s" % (len(errors), errors[:5]))
    return took


def one(data, probe, mode, plan, readers, tmp):
    m = Mount(data, probe, mode, tmp)
    st = m.stats()
    took = read_plan(m.dir, plan, st["sample_bytes"], readers)
    st = m.stats()
    helpers = st["decode"].get("helpers")
    cpu = m.close()
    r = {"clips_s": len(plan) / took, "cpu_clip": cpu / len(plan)}
    if helpers and helpers["serving"]:
        r["rss_helper"] = helpers["resident_bytes"] / helpers["serving"] / (1 << 20)
    return r


def replace_times(data, probe, tmp, times):
    m = Mount(data, probe, "isolated", tmp)
    out = []
    for _ in range(times):
        pid = helper_pid(m.proc.pid)
        before = m.stats()["decode"]["helpers"]
        os.kill(pid, signal.SIGKILL)
        for _ in range(3000):
            h = m.stats()["decode"]["helpers"]
            # A new replacement's time (the one before stays until it serves: started counts
            # a helper as it starts, and serving a dead one until it is reaped).
            if h["started"] > before["started"] and h["serving"] == before["serving"] and h["replace_seconds"] != before["replace_seconds"]:
                out.append(h["replace_seconds"])
                break
            time.sleep(0.005)
    m.close()
    return out


def helper_pid(mount):
    """A decoder helper of the mount: a child of one of its threads. The mount replaces its
    helpers once its scan says how large its videos' pictures are (their data limits), so one
    may be missing for a moment: waits up to 10 s."""
    for _ in range(1000):
        for task in os.listdir("/proc/%d/task" % mount):
            kids = open("/proc/%d/task/%s/children" % (mount, task)).read().split()
            if kids:
                return int(kids[0])
        time.sleep(0.01)
    raise SystemExit("no helper process")


def rng(xs, fmt="%.3f"):
    return (fmt + " (" + fmt + "-" + fmt + ")") % (statistics.median(xs), min(xs), max(xs))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--clips", default="480:240,1080:64", help="dataset height:samples read a round")
    ap.add_argument("--readers", type=int, default=2)
    a = ap.parse_args()
    began = time.time()
    lines = ["Machine: " + machine(), ""]
    with tempfile.TemporaryDirectory() as tmp:
        first = True
        for item in a.clips.split(","):
            h, n = item.split(":")
            data = os.path.join(CACHE, "dataset10-%sp" % h)
            subprocess.run([os.path.join(HERE, "dataset10.sh"), data, h], check=True)
            probe = os.path.join(tmp, "probe-" + h)
            m = Mount(data, probe, "in-process", tmp)  # fills the probe cache
            samples = m.stats()["samples"]
            m.close()
            res = {mode: [] for mode in MODES}
            for k in range(a.rounds):
                plan = random.Random(k).sample(range(samples), min(int(n), samples))
                for mode in (MODES if k % 2 == 0 else MODES[::-1]):
                    res[mode].append(one(data, probe, mode, plan, a.readers, tmp))
                    print("%sp round %d %s: %s" % (h, k, mode, res[mode][-1]), file=sys.stderr)
            iso, inp = res["isolated"], res["in-process"]
            if first:
                lines += ["| data | decoders | clips/s | CPU s per clip | resident MiB per helper |", "|---|---|---|---|---|"]
                first = False
            for mode in MODES:
                rs = res[mode]
                rss = [r["rss_helper"] for r in rs if "rss_helper" in r]
                lines.append("| %sp, %d clips | %s | %s | %s | %s |" % (h, len(plan), mode, rng([r["clips_s"] for r in rs], "%.1f"),
                             rng([r["cpu_clip"] for r in rs]), rng(rss, "%.0f") if rss else "-"))
            lines.append("| %sp | isolated / in-process | %s | %s | |" % (
                h, rng([x["clips_s"] / y["clips_s"] for x, y in zip(iso, inp)], "%.2fx"),
                rng([x["cpu_clip"] / y["cpu_clip"] for x, y in zip(iso, inp)], "%.2fx")))
        data = os.path.join(CACHE, "dataset10-480p")
        rep = replace_times(data, os.path.join(tmp, "probe-480"), tmp, 5)
        lines += ["", "A dead helper replaced (killed, until a new one serves): %s s, %d times" % (rng(rep), len(rep))]
    lines += ["", "%d rounds, %.0f s" % (a.rounds, time.time() - began)]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
