#!/usr/bin/python3
"""The soak (issue 18): vidfs's resident memory under load, for --seconds (default 600).

make bench's dataset (bench/dataset.sh: 200 videos, 468 samples of 16x224x224) mounted with
--cache-mem 256MiB. 16 threads pread whole samples of clips.raw: 8 (one process) follow a plan of
50 epochs (50 shuffled orders of every sample, 23,400 entries, written to .vidfs/plans/soak),
taking its entries in turn as a DataLoader's workers do, and writing it again when they come to
its end (--plans 8: 8 processes of one thread, each with a plan of its own, as DDP ranks); 8
(another process) read random samples. Every --every seconds, vidfs's VmRSS and the
stats' memory by part are sampled. Reports the peak (VmHWM), each quarter's peak, whether the
memory is flat (the last quarter's peak within 5 % of the second's) and within the cache plus
150 MiB, and the readers' errors. Saves the samples as JSON in ~/.cache/vidfs/bench.

--copy (issue 32): the same with a training copy in a fresh directory (--cache-keep copy
--copy-fill videos): the copy fills while the readers read, and later reads come from it.

PSS (issue 51): the PSS of the mount and its decoder helpers together is sampled too (each
process's /proc/PID/smaps_rollup: shared memory counted once over those that map it), and report
its peak, each quarter's, whether it is flat and within the cache plus 150 MiB, and each
helper's; with --source DIR (bench/dataset10.sh's 480p videos, say), --workers N (default 2, as
run.py mounts) and --decoders isolated|in-process to compare.

--hits (issue 33): the same 16 readers, of cached samples only: the first 110 MiB of samples (45
of them), read once before the clock starts so that the cache holds them, are all the plans and
the random readers take; nothing is decoded or evicted after, and the readers go as fast as
vidfs answers (thousands of reads a second, where the decoding soak makes about 50).
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run  # noqa: E402  (the mount, the dataset, machine())

PY = "/usr/bin/python3"
MiB = 1 << 20
CACHE_MEM = 256 * MiB
EPOCHS = 50

READERS = """
import json, os, random, sys, threading, time
mnt, S, n, stop_at, threads, planned = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), sys.argv[6] != "random"
name = sys.argv[6]
path = os.path.join(mnt, "clips.raw")
lock = threading.Lock()  # guards plan, pos, writes
plan, pos, writes = [], 0, 0
reads, errors = [0] * threads, []
def new_plan():
    global plan, pos, writes
    rnd = random.Random(writes)
    plan = []
    for _ in range(%d):
        e = list(range(n))
        rnd.shuffle(e)
        plan += e
    with open(os.path.join(mnt, ".vidfs", "plans", name), "w") as f:
        f.write(" ".join(map(str, plan)) + "\\n")
    pos, writes = 0, writes + 1
def next_sample(rnd):
    global pos
    if not planned:
        return rnd.randrange(n)
    with lock:
        if pos >= len(plan):
            new_plan()
        pos += 1
        return plan[pos - 1]
def reader(k):
    fd, rnd, buf = os.open(path, os.O_RDONLY), random.Random(k), bytearray(S)
    while time.time() < stop_at:
        i = next_sample(rnd)
        try:
            got = os.preadv(fd, [buf], i * S)
            if got != S:
                errors.append("sample %%d: short read of %%d" %% (i, got))
        except OSError as e:
            if e.errno == 4:
                continue
            errors.append("sample %%d: %%s" %% (i, e))
        reads[k] += 1
if planned:
    new_plan()
ts = [threading.Thread(target=reader, args=(k,)) for k in range(threads)]
[t.start() for t in ts]; [t.join() for t in ts]
print(json.dumps({"reads": sum(reads), "plan_writes": writes, "errors": len(errors), "examples": errors[:5]}))
""" % EPOCHS


def status(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k = line.split(":")[0]
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(line.split()[1]) << 10
    return out


def helpers(pid):
    """The mount's decoder helpers: the children of any of its threads."""
    out = []
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            out += [int(c) for c in open("/proc/%d/task/%s/children" % (pid, t)).read().split()]
        except OSError:
            pass
    return out


def pss(pid):
    """A process's proportional set size, in bytes (0 once it is gone)."""
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) << 10
    except OSError:
        pass
    return 0


HITS_BYTES = 110 * MiB  # the samples --hits reads, in the cache: as in issue 33's report


def warm(mnt, S, n):
    """Reads samples 0..n-1 once, so that the cache holds them, and checks that it does."""
    fd = os.open(os.path.join(mnt, "clips.raw"), os.O_RDONLY)
    try:
        for i in range(n):
            if len(os.pread(fd, S, i * S)) != S:
                raise SystemExit("warm-up: short read of sample %d" % i)
    finally:
        os.close(fd)
    st = json.load(open(os.path.join(mnt, ".vidfs", "stats")))
    if st["cache"]["ready_samples"] < n:
        raise SystemExit("warm-up: %d samples ready of the %d read" % (st["cache"]["ready_samples"], n))


def soak(source, secs, every, plans, hits=False, copy_dir=None, workers=None, decoders=None):
    extra = ["--cache-mem", "%dMiB" % (CACHE_MEM // MiB)]
    if workers:
        extra += ["--workers", str(workers)]
    if decoders:
        extra += ["--decoders", decoders]
    if copy_dir:
        extra += ["--cache-dir", copy_dir, "--cache-keep", "copy", "--copy-fill", "videos"]
    with run.Mounted(source, extra, name="mnt-soak") as m:
        lay = json.load(open(os.path.join(m.dir, ".vidfs", "layout.json")))
        n = lay["samples"]
        if hits:
            n = min(n, HITS_BYTES // lay["sample_bytes"])
            warm(m.dir, lay["sample_bytes"], n)
        start = time.time()
        stop_at = start + secs
        kinds = [("soak%d" % k, 8 // plans) for k in range(plans)] + [("random", 8)]
        procs = [subprocess.Popen([PY, "-c", READERS, m.dir, str(lay["sample_bytes"]), str(n), str(stop_at), str(t), kind],
                                  stdout=subprocess.PIPE, text=True) for kind, t in kinds]
        samples = []
        while any(p.poll() is None for p in procs):
            time.sleep(every)
            s = status(m.proc.pid)
            hs = {h: pss(h) for h in helpers(m.proc.pid)}
            s["pss"], s["helper_pss"] = pss(m.proc.pid) + sum(hs.values()), sorted(hs.values())
            st = json.load(open(os.path.join(m.dir, ".vidfs", "stats")))
            s.update({"t": time.time() - start, "memory": st["memory"], "requests": st["reads"]["requests"],
                      "plan": st["plan"]["length"], "errors": len(st.get("errors") or []), "hits": st["cache"]["hits"],
                      "misses": st["cache"]["misses"], "evicted": st["cache"]["evicted"]})
            samples.append(s)
            run.log("soak %4.0f s: RSS %4.0f MiB (cache %4.0f, Go heap %4.0f, runtime %4.0f, native %4.0f), PSS with %d helpers %4.0f MiB, %d reads" % (
                s["t"], s["VmRSS"] / MiB, st["memory"]["cache_bytes"] / MiB, st["memory"]["go_heap_bytes"] / MiB,
                st["memory"]["go_runtime_bytes"] / MiB, st["memory"]["native_bytes"] / MiB, len(hs), s["pss"] / MiB, s["requests"]))
        hwm = status(m.proc.pid)["VmHWM"]
        got = [json.loads(p.stdout.read()) for p in procs]
        planned = {k: sum(g[k] for g in got[:-1]) for k in ("reads", "plan_writes", "errors")}
        planned["examples"] = [e for g in got[:-1] for e in g["examples"]]
        readers = {"plan": planned, "random": got[-1]}
    return {"plans": plans, "seconds": secs, "samples": samples, "hwm": hwm, "readers": readers, "dataset_samples": lay["samples"],
            "plan_entries": EPOCHS * n, "machine": run.machine(), "began": start, "hits": hits, "read_samples": n,
            "sample_bytes": lay["sample_bytes"], "source": source, "workers": workers, "decoders": decoders}


def report(r):
    secs, S = r["seconds"], r["samples"]
    q = [max([s["VmRSS"] for s in S if k * secs / 4 <= s["t"] < (k + 1) * secs / 4] or [0]) for k in range(4)]
    flat = q[3] <= 1.05 * q[1]
    over = r["hwm"] - CACHE_MEM
    peak = max(S, key=lambda s: s["VmRSS"]) if S else {"memory": {}}
    mem = peak["memory"]
    rd = r["readers"]
    hits = r.get("hits", False)
    which = ("the first %d (%.0f MiB, read once before: cache hits only)" % (r["read_samples"], r["read_samples"] * r["sample_bytes"] / MiB)
             if hits else "all")
    L = ["Measured %s on %s by `bench/soak.py --seconds %d%s`: 16 threads pread whole samples of make bench's dataset"
         " (%d samples; %s of them), 8 following %s of %d epochs, %s entries each (written %d times in all), 8 at random;"
         " --cache-mem 256MiB; vidfs's VmRSS sampled every few seconds." % (
             time.strftime("%Y-%m-%d", time.localtime(r["began"])), r["machine"], secs, " --hits" if hits else "",
             r["dataset_samples"], which,
             "one plan (in turn, as a DataLoader's workers)" if r.get("plans", 1) == 1 else
             "%d plans (a process each, as DDP ranks)" % r["plans"], EPOCHS, format(r["plan_entries"], ","),
             rd["plan"]["plan_writes"]), "",
         "| | MiB |", "|---|---:|",
         "| peak resident (VmHWM) | %.0f |" % (r["hwm"] / MiB)]
    for k in range(4):
        L.append("| peak in quarter %d (%.0f-%.0f s) | %.0f |" % (k + 1, k * secs / 4, (k + 1) * secs / 4, q[k] / MiB))
    L += ["| at the highest sample: cache buffers | %.0f |" % (mem.get("cache_bytes", 0) / MiB),
          "| Go heap | %.0f |" % (mem.get("go_heap_bytes", 0) / MiB),
          "| Go runtime | %.0f |" % (mem.get("go_runtime_bytes", 0) / MiB),
          "| native | %.0f |" % (mem.get("native_bytes", 0) / MiB), "",
          "Reads: %d on the plan, %d at random (%.0f a second), %d errors%s." % (
              rd["plan"]["reads"], rd["random"]["reads"], (rd["plan"]["reads"] + rd["random"]["reads"]) / secs,
              rd["plan"]["errors"] + rd["random"]["errors"],
              " (" + "; ".join(rd["plan"]["examples"] + rd["random"]["examples"]) + ")" if rd["plan"]["errors"] + rd["random"]["errors"] else ""),
          "Cache over the run: %d hits, %d misses, %d evicted." % tuple(
              S[-1].get(k, 0) - S[0].get(k, 0) if S else 0 for k in ("hits", "misses", "evicted")),
          "Flat (the last quarter's peak within 5 %% of the second's): %s (%.0f MiB against %.0f MiB). Within the cache"
          " plus 150 MiB: %s (%.0f MiB above the cache's 256 MiB)." % (
              "yes" if flat else "no", q[3] / MiB, q[1] / MiB, "yes" if over <= 150 * MiB else "no", over / MiB)]
    if S and "pss" in S[0]:
        p = [max([s["pss"] for s in S if k * secs / 4 <= s["t"] < (k + 1) * secs / 4] or [0]) for k in range(4)]
        top = max(S, key=lambda s: s["pss"])
        L += ["", "PSS of the mount and its helpers (%s, --workers %s, --decoders %s): peak %.0f MiB; each quarter's peak %s MiB;"
              " flat: %s; within the cache plus 150 MiB (%.0f MiB): %s. At the peak, %d helpers of %s MiB each." % (
                  os.path.basename(r.get("source") or ""), r.get("workers") or 2, r.get("decoders") or "isolated",
                  top["pss"] / MiB, ", ".join("%.0f" % (v / MiB) for v in p), "yes" if p[3] <= 1.05 * p[1] else "no",
                  (CACHE_MEM + 150 * MiB) / MiB, "yes" if top["pss"] <= CACHE_MEM + 150 * MiB else "no",
                  len(top["helper_pss"]), ", ".join("%.0f" % (v / MiB) for v in top["helper_pss"]) or "no")]
    return "\n".join(L)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, default=600)
    ap.add_argument("--every", type=float, default=3)
    ap.add_argument("--plans", type=int, default=1, choices=[1, 2, 4, 8],
                    help="plans the 8 planned readers follow: 1 (taking its entries in turn) or one per process")
    ap.add_argument("--hits", action="store_true",
                    help="read only samples the cache holds (the first 110 MiB, read once before): issue 33's soak")
    ap.add_argument("--copy", action="store_true",
                    help="with a training copy (--cache-keep copy --copy-fill videos) in a fresh directory: issue 32's soak")
    ap.add_argument("--from", dest="saved", help="re-render an earlier soak's results (its JSON)")
    ap.add_argument("--source", help="the videos to mount (default: make bench's dataset, made by bench/dataset.sh)")
    ap.add_argument("--workers", type=int, help="vidfs mount --workers (default: run.py's 2)")
    ap.add_argument("--decoders", choices=["isolated", "in-process"], help="vidfs mount --decoders")
    a = ap.parse_args()
    if a.saved:
        print(report(json.load(open(a.saved))))
        return
    source = a.source
    if not source:
        source = os.path.join(run.CACHE, "dataset-v1")
        subprocess.run([os.path.join(HERE, "dataset.sh"), source], check=True)
    if a.copy:
        import tempfile
        with tempfile.TemporaryDirectory(prefix="soak-copy-", dir=run.CACHE) as d:
            r = soak(source, a.seconds, a.every, a.plans, a.hits, d, a.workers, a.decoders)
    else:
        r = soak(source, a.seconds, a.every, a.plans, a.hits, None, a.workers, a.decoders)
    saved = os.path.join(run.CACHE, "soak%s-%s.json" % ("-hits" if a.hits else "-copy" if a.copy else "", time.strftime("%Y%m%d-%H%M%S", time.localtime(r["began"]))))
    json.dump(r, open(saved, "w"))
    run.log("samples saved in %s (--from re-renders them)" % saved)
    print(report(r))


if __name__ == "__main__":
    main()
