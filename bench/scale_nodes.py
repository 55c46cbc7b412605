#!/usr/bin/python3
"""vidfs on many nodes, at scale (issue 40): what a second node's mount, a plan of 16 million
entries and placement by node cost, at the largest size whose probe cache bench/scale.py made
(N videos; --videos).

1. Node A: a mount with --cache-dir A, from the probe cache; node B, while A serves: another
   mount of the same videos with --cache-dir B sharing the probe cache (as a second node
   would). Time to .vidfs/stats, resident memory, Go heap.
2. A plan of about 16 million entries: the same videos mounted with --step 4 (68 samples a
   video: 16.3 million at 240,000 videos; from a million videos, the default step, 17 a video),
   PlanSampler(epochs=1) drawing and writing one
   epoch of every sample, then the time until the stats show it; resident memory beside the
   cache's buffers (which the plan's first decodes fill) before and 2 s after, and per sample.
3. placement() (the rule PlanSampler(placement="node") and vidfs copy --nodes follow) over
   1,000,000 made-up video names on 8 nodes, in Python; the Go side is BenchmarkAssign
   (go test -bench Assign ./placement/).
Prints each figure; --json saves them.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import scale  # noqa: E402  (Mounted, probe_dir, source, await_plan, CACHE)

import numpy as np  # noqa: E402
import vidfs  # noqa: E402

MiB = 1 << 20


def heap(st):
    m = st["memory"]
    return m.get("go_heap_live_bytes") or m.get("go_heap_bytes", 0)


def second_node(n, src):
    """Node A, then node B while A serves, each with its own --cache-dir, one probe cache."""
    out = {}
    dirs = [os.path.join(scale.CACHE, "node-%s" % x) for x in "ab"]
    for d in dirs:
        subprocess.run(["rm", "-rf", d], check=True)
    with scale.Mounted(src, scale.probe_dir(n), ["--cache-dir", dirs[0], "--cache-disk", "1GiB"], name="mnt-a") as a:
        time.sleep(1)
        out["a"] = {"ready_s": a.ready_s, "rss": a.rss(), "heap": heap(a.stats())}
        with scale.Mounted(src, scale.probe_dir(n), ["--cache-dir", dirs[1], "--cache-disk", "1GiB"], name="mnt-b") as b:
            time.sleep(1)
            out["b"] = {"ready_s": b.ready_s, "rss": b.rss(), "heap": heap(b.stats())}
    for d in dirs:
        subprocess.run(["rm", "-rf", d], check=True)
    return out


def big_plan(n, src):
    """One epoch of every sample written as one plan, and applied: at --step 4 (68 samples a
    video) up to 240,000 videos, at the default step (17) from a million, about 16 million."""
    step = "4" if n * 17 < 12_000_000 else "16"
    with scale.Mounted(src, scale.probe_dir(n), ["--step", step], name="mnt-plan") as mt:
        time.sleep(1)
        m = vidfs.Mount(mt.dir)
        rss0, st0 = mt.rss(), mt.stats()
        w0 = st0["plan"]["writes"]
        t0, c0 = time.perf_counter(), time.process_time()
        vidfs.PlanSampler(m, seed=7, epochs=1)
        t1, c1 = time.perf_counter(), time.process_time()
        scale.await_plan(mt.stats, w0)
        t2 = time.perf_counter()
        time.sleep(2)
        st = mt.stats()
        beside = lambda s: s["memory"]["resident_bytes"] - s["memory"]["cache_bytes"]  # noqa: E731
        return {"samples": len(m), "entries": st["plan"]["length"], "construct_s": t1 - t0, "construct_cpu_s": c1 - c0,
                "applied_after_s": t2 - t1, "rss_before": beside(st0), "rss_after": beside(st), "heap_before": heap(st0),
                "heap_after": heap(st)}


def placement_cost(videos, nodes):
    names = [b"train/class%03d/v%07d.mp4" % (v % 400, v) for v in range(videos)]
    w = np.ones(videos, dtype=np.int64)
    runs = []
    for _ in range(3):
        t0, c0 = time.perf_counter(), time.process_time()
        vidfs.placement(names, w, 0, nodes)
        runs.append((time.perf_counter() - t0, time.process_time() - c0))
    return {"videos": videos, "nodes": nodes, "wall_s": [r[0] for r in runs], "cpu_s": [r[1] for r in runs],
            "max_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--videos", type=int, default=240000, help="a size bench/scale.py has probed (its probe cache)")
    ap.add_argument("--json", help="save the figures here")
    a = ap.parse_args()
    n = a.videos
    if not os.path.isdir(scale.probe_dir(n)):
        raise SystemExit("no probe cache for %d videos: run bench/scale.py --sizes %d first" % (n, n))
    src = scale.source(n)
    r = {"machine": scale.run.machine(), "videos": n}
    r["nodes"] = second_node(n, src)
    for k in "ab":
        x = r["nodes"][k]
        print("node %s: ready in %.2f s, RSS %.0f MiB, Go heap %.0f MiB" % (k.upper(), x["ready_s"], x["rss"] / MiB, x["heap"] / MiB))
    r["plan"] = p = big_plan(n, src)
    print("plan of %d entries (%d samples): PlanSampler %.2f s (%.2f s CPU), shown in the stats %.3f s after; "
          "resident beside the cache %.0f -> %.0f MiB (%.1f B a sample), Go heap %.0f -> %.0f MiB" % (
              p["entries"], p["samples"], p["construct_s"], p["construct_cpu_s"], p["applied_after_s"], p["rss_before"] / MiB,
              p["rss_after"] / MiB, (p["rss_after"] - p["rss_before"]) / p["samples"], p["heap_before"] / MiB, p["heap_after"] / MiB))
    r["placement"] = q = placement_cost(1_000_000, 8)
    print("placement() of %d videos on %d nodes: %s s wall, %s s CPU, max RSS %.0f MiB" % (
        q["videos"], q["nodes"], " ".join("%.2f" % x for x in q["wall_s"]), " ".join("%.2f" % x for x in q["cpu_s"]),
        q["max_rss"] / MiB))
    if a.json:
        json.dump(r, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
