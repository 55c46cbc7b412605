#!/usr/bin/python3
"""Memory of a mount keeping a training copy, at the size of real datasets (issue 39): resident
memory beside the cache, the Go heap, its soft limit, and the collector's cycles while a trainer
reads fresh random clips and the copy fills.

For each size N (bench/scale.py's sources: N hard links to one 10 s video, its probe caches), a
mount `--frames 16 --stride 2 --size 224x224 --cache-mem 1GiB --cache-dir DIR --cache-disk 64GiB`
(keep and fill left to their defaults: frames, and auto) of an empty DIR; then a reader (this
script, a thread per --readers) reads samples in the order of vidfs.PlanSampler(clips="random",
clips_per_video=1) (an epoch and the next in the plan: 2 N entries; epoch after epoch, the
readers taking each epoch's samples in turn) for --seconds, while the mount's
.vidfs/stats is sampled every second. Reports, per size: the mount time, resident memory less the
cache's buffers after the mount and at its peak while reading (goal: at most 150 MiB), the live Go
heap and the soft limit, the collector's cycles a second and its share of vidfs's CPU while reading,
clips read a second, and the copy's videos whole and frames at the end. Prints Markdown.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))
import scale  # noqa: E402  (the sources, Mounted, cpu_seconds)
import vidfs  # noqa: E402

MiB = 1 << 20


def measure(n, seconds, readers):
    src = scale.source(n)
    probe = os.path.join(scale.CACHE, "probe-%d" % n)
    copydir = tempfile.mkdtemp(prefix="vidfs-copymem-", dir=scale.CACHE)
    try:
        with scale.Mounted(src, probe, ["--cache-dir", copydir, "--cache-disk", "64GiB"], name="copymem") as m:
            time.sleep(2)  # the soft memory limit is set from the live heap once the mount serves
            st = m.stats()
            mem0 = st["memory"]
            out = {"videos": n, "samples": st["samples"], "ready_s": m.ready_s,
                   "after_mount": (mem0["resident_bytes"] - mem0["cache_bytes"]) / MiB,
                   "live0": mem0.get("go_heap_live_bytes", 0) / MiB, "limit0": mem0.get("go_memory_limit_bytes", 0) / MiB,
                   "keep": "frames" if st.get("copy") else "samples"}
            mount = vidfs.Mount(m.dir)
            t0 = time.perf_counter()
            sampler = vidfs.PlanSampler(mount, seed=39, clips="random", clips_per_video=1)
            out["plan_s"] = time.perf_counter() - t0
            done = threading.Event()
            count = [0] * readers
            epochs = [list(iter(sampler))]  # epoch 0's order; the next are drawn as the readers get there
            lock = threading.Lock()

            def order(e):
                with lock:
                    while len(epochs) <= e:
                        sampler.set_epoch(len(epochs))  # writes that epoch's plan (and the next's)
                        epochs.append(list(iter(sampler)))
                    return epochs[e]

            def read(k):
                fd = os.open(os.path.join(m.dir, "clips.raw"), os.O_RDONLY)
                S = mount.sample_bytes
                try:
                    e = 0
                    while not done.is_set():
                        o = order(e)
                        for j in range(k, len(o), readers):
                            if done.is_set():
                                return
                            os.pread(fd, S, o[j] * S)
                            count[k] += 1
                        e += 1
                finally:
                    os.close(fd)

            threads = [threading.Thread(target=read, args=(k,)) for k in range(readers)]
            gc0, gcs0, cpu0, w0 = mem0.get("gc_cycles", 0), mem0.get("gc_cpu_seconds", 0), scale.cpu_seconds(m.pid), time.perf_counter()
            for th in threads:
                th.start()
            peak, peak_live, peak_limit = 0, 0, 0
            while time.perf_counter() - w0 < seconds and any(th.is_alive() for th in threads):
                time.sleep(1)
                mem = m.stats()["memory"]
                beside = mem["resident_bytes"] - mem["cache_bytes"]
                if beside > peak:
                    peak = beside
                peak_live = max(peak_live, mem.get("go_heap_live_bytes", 0))
                peak_limit = max(peak_limit, mem.get("go_memory_limit_bytes", 0))
            done.set()
            for th in threads:
                th.join()
            w1 = time.perf_counter()
            st = m.stats()
            mem = st["memory"]
            cpu = scale.cpu_seconds(m.pid) - cpu0
            out.update({"read_s": w1 - w0, "clips": sum(count), "clips_per_s": sum(count) / (w1 - w0),
                        "peak": peak / MiB, "end": (mem["resident_bytes"] - mem["cache_bytes"]) / MiB,
                        "live_peak": peak_live / MiB, "limit_peak": peak_limit / MiB,
                        "gc_per_s": (mem.get("gc_cycles", 0) - gc0) / (w1 - w0),
                        "gc_share": (mem.get("gc_cpu_seconds", 0) - gcs0) / cpu if cpu > 0 else 0, "vidfs_cpu_s": cpu})
            c = st.get("copy") or {}
            out.update({"copy_complete": c.get("complete", 0), "copy_frames": c.get("frames", 0), "whole_fills": c.get("whole_fills", 0)})
            return out
    finally:
        shutil.rmtree(copydir, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="40,240000")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--readers", type=int, default=4)
    a = ap.parse_args()
    rows = []
    for n in map(int, a.sizes.split(",")):
        scale.log("copy memory: %d videos" % n)
        rows.append(measure(n, a.seconds, a.readers))
        scale.log("  %s" % json.dumps(rows[-1]))
    print("| videos | samples | keeps | mount s | resident beside the cache, MiB: mounted / peak reading / end | Go heap live, MiB (peak) | soft limit, MiB (peak) | GC cycles/s | GC share of vidfs CPU | clips/s | videos whole, frames |")
    print("|---:|---:|---|---:|---|---:|---:|---:|---:|---:|---|")
    for r in rows:
        print("| %d | %d | %s | %.1f | %.0f / %.0f / %.0f | %.0f (%.0f) | %.0f (%.0f) | %.2f | %.1f %% | %.0f | %d, %d |" % (
            r["videos"], r["samples"], r["keep"], r["ready_s"], r["after_mount"], r["peak"], r["end"], r["live0"], r["live_peak"],
            r["limit0"], r["limit_peak"], r["gc_per_s"], 100 * r["gc_share"], r["clips_per_s"], r["copy_complete"], r["copy_frames"]))


if __name__ == "__main__":
    main()
