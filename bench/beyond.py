#!/usr/bin/python3
"""make bench, part 2: where vidfs goes beyond decoding exactly, on make bench's dataset.

1. Disk tier, with each codec: bench/train.py (DataLoader, batch 8, 2 workers, plan each epoch)
   for 3 epochs with a 512 MiB memory cache (smaller than the dataset) and --cache-dir on local
   disk, then 2 more epochs on a fresh mount over the same tier; against the same without the
   tier and against the pre-decoded .npy ceiling, taking turns. Reports disk bytes per sample and
   CPU per clip. Then one reader's hit costs, tier and memory, against tmpfs (bench/hits.py).
2. --decode fast against exact: `go test -bench FastVsExact` (H.264, HEVC, VP9, MPEG-4).
3. A single-process reader (DataLoader with no workers) paced by a training step, vidfs with and
   without a plan, and PyAV.
4. Memory-mapped reads (np.load(mmap_mode="r"), np.array(a[i])) against pread of the same
   cached samples (bench/mapped.py).
5. Resident memory by part while 16 threads read random samples for a minute.
The figures go into docs/benchmarks.md between the beyond markers.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import hits  # noqa: E402  (one reader's hit costs)
import run  # noqa: E402  (make bench's helpers: the mount, the ceiling, the dataset)

PY = "/usr/bin/python3"


def trainer(contender, mnt, source, epochs, workers=2, step=0.0, pid=0):
    return run.train(contender, source, mnt, os.path.join(run.CACHE, "ceiling-v1"), step, pid, epochs, workers)


def rate(epochs):
    return sum(e["clips"] for e in epochs) / sum(e["seconds"] for e in epochs)


def per_clip(epochs):
    """CPU seconds per clip over epochs (trainer, DataLoader workers and vidfs), and vidfs's part."""
    n = sum(e["clips"] for e in epochs)
    return sum(e["cpu_s"] for e in epochs) / n, sum(e["vidfs_cpu_s"] for e in epochs) / n


def tier_rounds(source, index, rounds, codecs):
    """Per round, taking turns: vidfs without a tier, with a tier of each codec (3 epochs, then 2
    on a fresh mount over it), and the ceiling. Returns rows[run] = [per round ...]."""
    rows = {"none": [], "npy": [], "none_cpu": [], "none_later_cpu": [], "none_later_vidfs_cpu": []}
    for c in codecs:
        for k in ["epoch1", "later", "remount", "epoch1_cpu", "later_cpu", "later_vidfs_cpu", "per_sample", "written"]:
            rows["%s %s" % (c, k)] = []
    for r in range(rounds):
        with run.Mounted(source) as m:
            res = trainer("vidfs-plan", m.dir, source, 3, pid=m.proc.pid)
            rows["none"].append(rate(res["epochs"]))
            rows["none_cpu"].append(per_clip(res["epochs"][:1])[0])
            cpu, vcpu = per_clip(res["epochs"][1:])
            rows["none_later_cpu"].append(cpu)
            rows["none_later_vidfs_cpu"].append(vcpu)
        for c in codecs if r % 2 == 0 else codecs[::-1]:
            tdir = tempfile.mkdtemp(prefix="vidfs-tier-", dir=run.CACHE)
            flags = ["--cache-dir", tdir, "--cache-disk", "8GiB", "--cache-keep", "samples", "--cache-disk-codec", c]
            try:
                with run.Mounted(source, flags) as m:
                    res = trainer("vidfs-plan", m.dir, source, 3, pid=m.proc.pid)
                    rows[c + " epoch1"].append(rate(res["epochs"][:1]))
                    rows[c + " later"].append(rate(res["epochs"][1:]))
                    rows[c + " epoch1_cpu"].append(per_clip(res["epochs"][:1])[0])
                    cpu, vcpu = per_clip(res["epochs"][1:])
                    rows[c + " later_cpu"].append(cpu)
                    rows[c + " later_vidfs_cpu"].append(vcpu)
                with run.Mounted(source, flags) as m:
                    res = trainer("vidfs-plan", m.dir, source, 2, pid=m.proc.pid)
                    rows[c + " remount"].append(rate(res["epochs"]))
                    t = json.load(open(os.path.join(m.dir, ".vidfs", "stats"))).get("tier", {})
                    if t.get("entries"):
                        rows[c + " per_sample"].append(t["used_bytes"] / t["entries"])
                        rows[c + " written"].append(t["entries"])
            finally:
                shutil.rmtree(tdir, ignore_errors=True)
        res = trainer("npy", index, source, 3)
        rows["npy"].append(rate(res["epochs"]))
        run.log("tier round %d: " % (r + 1) + ", ".join("%s %.1f" % (k, v[-1]) for k, v in rows.items()
                                                       if v and (k in ("none", "npy") or k.endswith(" later"))))
    return rows


def go_bench(name, pkg, benchtime, count):
    """`go test -bench NAME PKG`, count runs: {sub-benchmark: [its metrics, run by run]}."""
    out = subprocess.run([os.path.join(ROOT, "scripts", "with-ffmpeg"), "go", "test", "-run", "^$", "-bench", name,
                          "-benchtime", benchtime, "-count", str(count), pkg], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    res = {}
    for line in out.splitlines():
        mm = re.match(r"Benchmark%s/(\w+)-\d+\s+\d+\s+\d+ ns/op\s+(.*)" % name, line)
        if mm:
            res.setdefault(mm.group(1), []).append(dict((k, float(v)) for v, k in re.findall(r"(\S+) (\S+)", mm.group(2))))
    return res


def codec_bench(count):
    """Each codec of the disk tier on 16 samples of real footage (fs's BenchmarkTierCodec)."""
    return go_bench("TierCodec", "./fs/", "100x", count)


def fast_bench(count):
    return go_bench("FastVsExact", "./decode/", "1x", count)


def paced_single(source, index, step, epochs):
    rows = {}
    for c in ["vidfs", "vidfs-plan", "pyav", "npy"]:
        if c in ("pyav", "npy"):
            res = trainer(c, index, source, epochs, workers=0, step=step)
        else:
            with run.Mounted(source) as m:
                res = trainer(c, m.dir, source, epochs, workers=0, step=step, pid=m.proc.pid)
        rows[c] = res
        run.log("single paced reader %-10s %.1f clips/s, waited %.1f %%" % (c, res["clips_per_s"], 100 * res["wait_fraction"]))
    return rows


def mapped(source, rounds):
    # A cache that holds every sample read (the later flag wins), so that both readers measure
    # the mount, not decoding.
    with run.Mounted(source, ["--cache-mem", "1GiB"]) as m:
        out = subprocess.run([PY, os.path.join(HERE, "mapped.py"), m.dir, "--samples", "150", "--rounds", str(rounds)],
                             check=True, capture_output=True, text=True).stdout
    return json.loads(out)


MEM_READER = """
import os, random, sys, threading, time
path, secs = sys.argv[1] + "/clips.raw", float(sys.argv[2])
S = int(sys.argv[3]); n = os.path.getsize(path) // S
def reader(seed):
    fd, rnd, buf = os.open(path, os.O_RDONLY), random.Random(seed), bytearray(S)
    end = time.time() + secs
    while time.time() < end:
        os.preadv(fd, [buf], rnd.randrange(n) * S)
threads = [threading.Thread(target=reader, args=(k,)) for k in range(16)]
[t.start() for t in threads]; [t.join() for t in threads]
"""


def memory16(source, secs):
    """16 threads read random samples for secs seconds; returns the stats' memory at peak RSS."""
    with run.Mounted(source) as m:
        lay = json.load(open(os.path.join(m.dir, ".vidfs", "layout.json")))
        p = subprocess.Popen([PY, "-c", MEM_READER, m.dir, str(secs), str(lay["sample_bytes"])])
        peak, reads = None, 0
        while p.poll() is None:
            time.sleep(2)
            st = json.load(open(os.path.join(m.dir, ".vidfs", "stats")))
            if peak is None or st["memory"]["resident_bytes"] > peak["resident_bytes"]:
                peak = st["memory"]
            reads = st["reads"]["requests"]
        for line in open("/proc/%d/status" % m.proc.pid):
            if line.startswith("VmHWM:"):
                peak["hwm_bytes"] = int(line.split()[1]) << 10
    peak["requests"] = reads
    return peak


def rng(v, fmt="%.1f"):
    return (fmt + " (" + fmt + "-" + fmt + ")") % (statistics.median(v), min(v), max(v))


def section(tier, single_hits, codec_runs, fast, single, step, mm, mem, secs, began):
    L = ["<!-- beyond:begin -->", "## Beyond the decode floor (bench/beyond.py)", "",
         "![disk tier, fast decoding, one paced reader](benchmarks-beyond.png)", "",
         "Measured %s on %s; the dataset of the loaders section (468 samples, T=16, stride 2, 224x224)." % (
             time.strftime("%Y-%m-%d", time.localtime(began)), run.machine()), ""]
    none, npy = tier["none"], tier["npy"]
    codecs = [k.split()[0] for k in tier if k.endswith(" later")]
    n = len(none)
    L += ["### Disk tier", "",
          "bench/train.py, DataLoader with 2 workers, batch 8, plan each epoch, flat out; memory cache 512 MiB (the dataset"
          " is 1.1 GB decoded); tier on local disk, with each codec (`--cache-disk-codec`). Median (range) of %d rounds"
          " taken in turns. CPU per clip adds up the trainer, its DataLoader workers and vidfs." % n, "",
          "| run | disk per sample | epoch 1 clips/s | epoch 1 CPU per clip | epochs 2-3 clips/s | epochs 2-3 CPU per clip (vidfs's part) | remounted, clips/s | of the ceiling, epochs 2-3 |",
          "|---|---:|---:|---:|---:|---:|---:|---:|",
          "| vidfs without the tier (every epoch decodes; clips/s of epochs 1-3) | - | %s | %s ms | %s | %s ms (%s ms) | | %s |" % (
              rng(none), rng([1000 * x for x in tier["none_cpu"]], "%.0f"), rng(none), rng([1000 * x for x in tier["none_later_cpu"]]),
              rng([1000 * x for x in tier["none_later_vidfs_cpu"]]), rng([a / b for a, b in zip(none, npy)], "%.2fx")),
          ]
    verdicts = []
    for c in codecs:
        g = lambda k: tier["%s %s" % (c, k)]
        ratio = [l / p for l, p in zip(g("later"), npy)]
        L.append("| tier, %s | %s | %s | %s ms | %s | %s ms (%s ms) | %s | %s |" % (
            c, "%.2f MB" % (statistics.median(g("per_sample")) / 1e6) if g("per_sample") else "-",
            rng(g("epoch1")), rng([1000 * x for x in g("epoch1_cpu")], "%.0f"), rng(g("later")),
            rng([1000 * x for x in g("later_cpu")]), rng([1000 * x for x in g("later_vidfs_cpu")]), rng(g("remount")),
            rng(ratio, "%.2fx")))
        verdicts.append("%s %s (%s)" % (c, rng(ratio, "%.2fx"), hits.verdict(ratio, 0.8)))
    L += ["| pre-decoded .npy (ceiling), epochs 1-3 | - | | | %s | | | 1 |" % rng(npy), "",
          "Epochs 2 and later with the tier against the ceiling in the same rounds (goal: at least 0.8x, on a host where the"
          " ceiling is above 300 clips/s; here it is %.0f): %s." % (statistics.median(npy), "; ".join(verdicts)), ""]
    if codec_runs:
        L += ["#### The codecs, one core", "",
              "`go test -bench TierCodec ./fs/`: 16 samples of real footage (Megamind and vtest from opencv-doc, H.264, 16x224x224,"
              " 2.41 MB each), each written to a tier (compressing, checksumming, writing, syncing) and read back 100 times"
              " (from the page cache: reading, checking, decompressing into a buffer like the memory cache's), one at a time;"
              " CPU time of the whole process per sample, median (range) of %d runs." % len(next(iter(codec_runs.values()))), "",
              "| codec | disk per sample | smaller by | write (compress) CPU per sample | hit (read, check, decompress) CPU per sample | allocations per hit |",
              "|---|---:|---:|---:|---:|---:|"]
        for c, runs in codec_runs.items():
            col = lambda k: [r[k] for r in runs]
            L.append("| %s | %.2f MB | %.2fx | %s ms | %s ms | %.0f |" % (
                c, statistics.median(col("disk-MB/sample")), statistics.median(col("ratio")), rng(col("write-cpu-ms/sample"), "%.1f"),
                rng(col("hit-cpu-ms/sample"), "%.2f"), max(col("allocs/op"))))
        L.append("")
    if single_hits:
        text, goals = hits.section(single_hits)
        L += ["#### One reader: what a hit costs", "", text, ""] + goals + [""]
    L += ["### --decode fast against exact", "",
          "`go test -bench FastVsExact ./decode/`: the same 60 clips (T=16, stride 2, 224x224 crop) of Megamind (720x528,"
          " GOP 48) decoded exactly and fast, taking turns, one thread each; median (range) of %d runs." % len(next(iter(fast.values()))), "",
          "| codec | exact clips/CPU s | fast clips/CPU s | fast / exact, CPU | PSNR fast vs exact, mean | worst frame |",
          "|---|---|---|---|---|---|"]
    best = 0
    for codec, runs in fast.items():
        col = lambda k: [r[k] for r in runs]
        best = max(best, statistics.median(col("x-cpu")))
        L.append("| %s | %s | %s | %s | %.1f dB | %.1f dB |" % (codec, rng(col("exact-clips/cpu-s")), rng(col("fast-clips/cpu-s")),
                                                               rng(col("x-cpu"), "%.2fx"), statistics.median(col("psnr-dB")),
                                                               min(col("min-psnr-dB"))))
    L += ["", "Goal: at least 1.3x exact per core at a mean PSNR of at least 35 dB: %s." % (
        "met" if best >= 1.3 else "not met (the in-loop filter is 15-20 % of H.264/HEVC decoding; VP9 and MPEG-4 have no"
        " such switch in FFmpeg)"), ""]
    L += ["### One reader, no DataLoader workers, paced", "",
          "bench/train.py with `--workers 0` (the trainer reads in its own process), a %.0f ms training step per batch of 8,"
          " 1 epoch; vidfs with its default 2 decode workers." % (1000 * step), "",
          "| reader | clips/s | in `next(loader)` (of wall time) | waiting for decodes, as vidfs counts it | CPU s/clip |",
          "|---|---|---|---|---|"]
    for c, name in [("vidfs-plan", "vidfs, plan written"), ("vidfs", "vidfs, no plan"), ("pyav", "PyAV Dataset (decodes in next)"),
                    ("npy", "pre-decoded .npy (the cost of reading and collating alone)")]:
        r = single[c]
        vw = "%.1f %%" % (100 * r["vidfs_wait_s"] / r["wall_s"]) if "vidfs_wait_s" in r else "-"
        L.append("| %s | %.1f | %.1f %% | %s | %.3f |" % (name, r["clips_per_s"], 100 * r["wait_fraction"], vw, r["cpu_s_per_clip"]))
    w = single["vidfs-plan"]["vidfs_wait_s"] / single["vidfs-plan"]["wall_s"]
    L += ["", "Time in `next(loader)` includes reading 19 MB per batch and collating it in the trainer's own process,"
          " which the .npy row pays as well; the goal is about waiting for decodes. Goal: with a plan the reader waits at"
          " most 2 %% of wall time for decodes: %s (%.1f %%, against %.1f %% without a plan)." % (
              "met" if w <= 0.02 else "not met", 100 * w, 100 * single["vidfs"]["vidfs_wait_s"] / single["vidfs"]["wall_s"]), ""]
    ratio = [a / b for a, b in zip(mm["mmap"], mm["pread"])]
    L += ["### Memory-mapped readers", "",
          "bench/mapped.py: %d samples in the memory cache, read whole through `np.array(a[i])` of `np.load(mmap_mode=\"r\")`"
          " (reopened each round) and through `pread`, taking turns, %d rounds." % (mm["samples"], len(ratio)), "",
          "| reader | clips/s |", "|---|---|",
          "| pread | %s |" % rng(mm["pread"], "%.0f"), "| memory map | %s |" % rng(mm["mmap"], "%.0f"), "",
          "Memory map / pread: %s (goal: at least 0.5x: %s)." % (rng(ratio, "%.2f"), "met" if min(ratio) >= 0.5 else (
              "met at the median" if statistics.median(ratio) >= 0.5 else "not met")), ""]
    MiB = lambda b: b / (1 << 20)
    over = mem["hwm_bytes"] - mem["cache_bytes"]
    L += ["### Memory with 16 readers", "",
          "16 threads `pread` random whole samples of clips.raw for %d s (%d read requests), no plan, --cache-mem %s;"
          " the mount's `.vidfs/stats` at its highest resident memory:" % (secs, mem["requests"], run.CACHE_MEM), "",
          "| part | MiB |", "|---|---|",
          "| resident (peak, VmHWM) | %.0f |" % MiB(mem["hwm_bytes"]),
          "| cache buffers | %.0f |" % MiB(mem["cache_bytes"]),
          "| Go heap (FUSE request buffers, stats) | %.0f |" % MiB(mem["go_heap_bytes"]),
          "| Go runtime (free heap spans, stacks) | %.0f |" % MiB(mem["go_runtime_bytes"]),
          "| native (FFmpeg decoders and filter graphs, the binary) | %.0f |" % MiB(mem["native_bytes"]), "",
          "Overhead above the cache: %.0f MiB (goal: at most 150 MiB: %s)." % (MiB(over), "met" if MiB(over) <= 150 else "not met"),
          "<!-- beyond:end -->"]
    return "\n".join(L)


def tier_only(r):
    """The disk tier's part of the section, for --only-tier."""
    fake = {"x": [{"x-cpu": 0, "exact-clips/cpu-s": 0, "fast-clips/cpu-s": 0, "psnr-dB": 0, "min-psnr-dB": 0}]}
    single = {c: {"clips_per_s": 0, "wait_fraction": 0, "cpu_s_per_clip": 0, "vidfs_wait_s": 0, "wall_s": 1} for c in
              ["vidfs-plan", "vidfs", "pyav", "npy"]}
    text = section(r["tier"], r["hits"], r["codecs"], fake, single, 0, {"mmap": [1], "pread": [1], "samples": 0},
                   {"hwm_bytes": 0, "cache_bytes": 0, "go_heap_bytes": 0, "go_runtime_bytes": 0, "native_bytes": 0,
                    "requests": 0}, 0, r["began"])
    return text[:text.index("### --decode fast")]


def chart(tier, fast, single, path):
    """Three panels: the tier's epochs against the ceiling, fast against exact, the paced reader's waits."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(1, 3, figsize=(15, 4.5))
    codecs = [k.split()[0] for k in tier if k.endswith(" later")]
    rows = [("no tier", "none")] + [("%s,\nepoch 1" % c, c + " epoch1") for c in codecs] + [
        ("%s,\nepochs 2-3" % c, c + " later") for c in codecs] + [(".npy\nceiling", "npy")]
    med = [statistics.median(tier[k]) for _, k in rows]
    err = [[m - min(tier[k]) for (_, k), m in zip(rows, med)], [max(tier[k]) - m for (_, k), m in zip(rows, med)]]
    ax[0].bar(range(len(rows)), med, yerr=err, color=["tab:gray"] + ["tab:blue"] * len(codecs) + ["tab:green"] * len(codecs) + ["tab:orange"])
    ax[0].set_xticks(range(len(rows)), [r for r, _ in rows], fontsize=7)
    ax[0].set_title("Disk tier by codec: clips/s (DataLoader, 2 workers)")
    codecs = list(fast)
    xc = [statistics.median([r["x-cpu"] for r in fast[c]]) for c in codecs]
    ax[1].bar(range(len(codecs)), xc, color="tab:purple")
    ax[1].axhline(1.3, color="k", ls="--", lw=1)
    for i, c in enumerate(codecs):
        ax[1].text(i, xc[i], "%.0f dB" % statistics.median([r["psnr-dB"] for r in fast[c]]), ha="center", va="bottom")
    ax[1].set_xticks(range(len(codecs)), codecs)
    ax[1].set_title("--decode fast: speed-up per core (PSNR vs exact)")
    names = [("vidfs-plan", "vidfs,\nplan"), ("vidfs", "vidfs,\nno plan"), ("pyav", "PyAV")]
    waits = [100 * (single[c]["vidfs_wait_s"] / single[c]["wall_s"] if "vidfs_wait_s" in single[c] else single[c]["wait_fraction"])
             for c, _ in names]
    ax[2].bar(range(len(names)), waits, color=["tab:green", "tab:gray", "tab:red"])
    ax[2].axhline(2, color="k", ls="--", lw=1)
    ax[2].set_xticks(range(len(names)), [n for _, n in names])
    ax[2].set_title("One paced reader: % of time waiting for decodes")
    fig.tight_layout()
    fig.savefig(path, dpi=80)


def write(doc, text):
    cur = open(doc).read()
    pat = re.compile(r"<!-- beyond:begin -->.*?<!-- beyond:end -->", re.S)
    cur = pat.sub(lambda m: text, cur) if pat.search(cur) else cur.rstrip("\n") + "\n\n" + text + "\n"
    open(doc, "w").write(cur)


def render(doc, r):
    text = section(r["tier"], r.get("hits"), r.get("codecs"), r["fast"], r["single"], r["step"], r["mapped"], r["memory"], r["memory_s"], r["began"])
    write(doc, text)
    chart(r["tier"], r["fast"], r["single"], os.path.join(os.path.dirname(doc), "benchmarks-beyond.png"))
    print(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--step", type=float, default=0.3, help="training step per batch of the single reader (s)")
    ap.add_argument("--doc", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    ap.add_argument("--from", dest="saved", help="re-render the figures of an earlier run (its results.json)")
    ap.add_argument("--only-tier", action="store_true", help="the disk tier and the hit costs alone, printed, not written")
    ap.add_argument("--codecs", default=",".join(hits.CODECS))
    a = ap.parse_args()
    if a.saved:
        r = json.load(open(a.saved))
        render(a.doc, r)
        return
    began = time.time()
    source = os.path.join(run.CACHE, "dataset-v1")
    index = os.path.join(run.CACHE, "index")
    subprocess.run([os.path.join(HERE, "dataset.sh"), source], check=True)
    with run.Mounted(source) as m:
        run.ceiling(m.dir, os.path.join(run.CACHE, "ceiling-v1"))
        os.makedirs(os.path.join(index, ".vidfs"), exist_ok=True)
        for f in ["index.csv", ".vidfs/layout.json"]:
            shutil.copy(os.path.join(m.dir, f), os.path.join(index, f))
    codecs = a.codecs.split(",")
    run.log("disk tier, %d rounds, codecs %s" % (a.rounds, ", ".join(codecs)))
    tier = tier_rounds(source, index, a.rounds, codecs)
    run.log("one reader's hit costs")
    single_hits = hits.measure(source, 3, codecs, 1024 if hits.max_pages_settable() else None)
    run.log("the codecs, one core")
    codec_runs = codec_bench(3)
    if a.only_tier:
        r = {"tier": tier, "hits": single_hits, "codecs": codec_runs, "began": began}
        json.dump(r, open(os.path.join(run.CACHE, "beyond-tier-results.json"), "w"))
        print(tier_only(r))
        return
    run.log("fast against exact")
    fast = fast_bench(3)
    run.log("single paced reader")
    single = paced_single(source, index, a.step, 1)
    run.log("memory-mapped reads")
    mm = mapped(source, 3)
    run.log("memory with 16 readers")
    mem = memory16(source, 60)
    r = {"tier": tier, "hits": single_hits, "codecs": codec_runs, "fast": fast, "single": single, "step": a.step, "mapped": mm,
         "memory": mem, "memory_s": 60, "began": began}
    saved = os.path.join(run.CACHE, "beyond-results.json")
    json.dump(r, open(saved, "w"))
    run.log("results saved in %s (--from re-renders them)" % saved)
    render(a.doc, r)
    run.log("done in %.0f s" % (time.time() - began))


if __name__ == "__main__":
    main()
