#!/usr/bin/python3
"""The training copy at a real run's shape (issue 47): 12 videos of 10 s at 480p
(bench/dataset10.sh, the 480p-12 set of bench/random_clips.py), a dense grid (--frames 16 --stride 2
--step 4 --size 224x224, --workers 2), PlanSampler(clips="random", clips_per_video=2), against a
mount without --cache-dir, taking turns in each round. vidfs's CPU is the mount's with its decoder
helpers (bench/random_clips.py's trainer: a DataLoader of batch 8 and 2 workers).

Rows:
  none, defaults            read flat out, 6 epochs; defaults: only --cache-dir (no --cache-disk:
                            the copy's bound is the filesystem's free space less a tenth)
  none-paced, paced         the trainer sleeps 0.15 s after each clip (bound by its GPU), 6 epochs
  none-10, told-10          flat out, 10 epochs; told: PlanSampler(epochs=10) tells the mount
  half-videos               --cache-disk HALF --copy-fill videos, flat out, 6 epochs
  half-paced                --cache-disk HALF, the defaults otherwise, paced, 6 epochs
HALF is half the whole copy as a mount estimates it with huff (the codec a copy that does not fit
as it is takes); the estimate is then held to what `vidfs copy` writes with huff and no bound.

Goals (issue 47), per round against the same round's no-copy run:
  paced:  epochs 3-6 decode at most 5 % of their clips; the time the trainer waits for clips, in
          all, at most 1.1x the no-copy run's
  flat:   no epoch over 1.3x the no-copy epoch's vidfs CPU per clip; epochs 5-6 decode at most 25 %
  told:   the 10 epochs' vidfs CPU at most 0.5x no copy's; no epoch over 3x
  half:   epochs 4-6 serve at least 40 % of their clips from the copy, and cost at most 1.05x no copy
  the estimate within 25 % of the whole copy, and fits about one half at HALF
Prints Markdown; --doc FILE writes it between <!-- copypolicy:begin --> and <!-- copypolicy:end -->.
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
sys.path.insert(0, HERE)
import random_clips as rc  # noqa: E402
from run import machine  # noqa: E402

PACE = 0.15
K = 2


def contenders(half):
    """name: (label, mount flags beyond the spec, epochs, pace, told)"""
    return {
        "none": ("no copy, flat out", [], 6, 0.0, False),
        "defaults": ("copy, the defaults, flat out", ["--cache-dir", "COPY"], 6, 0.0, False),
        "none-paced": ("no copy, paced", [], 6, PACE, False),
        "paced": ("copy, the defaults, paced", ["--cache-dir", "COPY"], 6, PACE, False),
        "none-10": ("no copy, flat out, 10 epochs", [], 10, 0.0, False),
        "told-10": ("copy, the defaults, PlanSampler(epochs=10)", ["--cache-dir", "COPY"], 10, 0.0, True),
        "half-videos": ("copy, --cache-disk %s --copy-fill videos, flat out" % half, ["--cache-dir", "COPY", "--cache-disk", half,
                                                                                   "--copy-fill", "videos"], 6, 0.0, False),
        "half-paced": ("copy, --cache-disk %s, paced" % half, ["--cache-dir", "COPY", "--cache-disk", half], 6, PACE, False),
    }


def copy_stats(mnt):
    return json.load(open(os.path.join(mnt, ".vidfs", "stats")))["copy"]


def measured(mnt):
    """The copy's stats once the mount has measured a frame's size (at most a minute)."""
    for _ in range(600):
        c = copy_stats(mnt)
        if not c.get("estimate_assumed"):
            break
        time.sleep(0.1)
    return c


def estimate(source, cache_mem):
    """What a mount with huff estimates the whole copy at (after it measured a frame), and what
    vidfs copy then writes with huff and room for all of it."""
    d = tempfile.mkdtemp(prefix="vidfs-copy-policy-est-", dir=rc.CACHE)
    try:
        with rc.Mounted(source, ["--cache-mem", cache_mem, "--cache-dir", d, "--cache-disk-codec", "huff", "--cache-keep", "copy"],
                        os.path.join(rc.CACHE, "random-logs", "copy-policy-estimate.log")) as m:
            est = measured(m.dir)["estimated_bytes"]
            subprocess.run([os.path.join(rc.ROOT, "bin", "vidfs"), "copy", m.dir], check=True, capture_output=True)
            written = copy_stats(m.dir)["used_bytes"]
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return est, written


def fits_at(source, cache_mem, half):
    d = tempfile.mkdtemp(prefix="vidfs-copy-policy-fit-", dir=rc.CACHE)
    try:
        with rc.Mounted(source, ["--cache-mem", cache_mem, "--cache-dir", d, "--cache-disk", half],
                        os.path.join(rc.CACHE, "random-logs", "copy-policy-fits.log")) as m:
            c = measured(m.dir)
            return c["fits"], c["codec"], c["estimated_bytes"]
    finally:
        shutil.rmtree(d, ignore_errors=True)


def run_one(name, c, source, cache_mem, rnd):
    label, flags, epochs, pace, told = c
    copydir = None
    extra = ["--cache-mem", cache_mem]
    if "COPY" in flags:
        copydir = tempfile.mkdtemp(prefix="vidfs-copy-policy-", dir=rc.CACHE)
        flags = [copydir if f == "COPY" else f for f in flags]
    logpath = os.path.join(rc.CACHE, "random-logs", "copy-policy-%s-r%d.log" % (name, rnd))
    try:
        with rc.Mounted(source, extra + flags, logpath) as m:
            res = rc.run_trainer(m.dir, epochs, K, vidfs_pid=m.proc.pid, pace=pace, told=told)
            res["final"] = rc.counts(rc.vidfs.Mount(m.dir))
    finally:
        if copydir:
            shutil.rmtree(copydir, ignore_errors=True)
    res["log_problems"] = rc.mount_log_problems(logpath)
    return res


def rank_reader(a):
    """One rank of a node: PlanSampler(placement="node") over a.world ranks on a.nodes nodes, reading
    its samples paced for a.epochs epochs; after each epoch, one JSON line: the videos it read, and
    its node's copy (videos whole)."""
    m = rc.vidfs.Mount(a.mnt)
    s = rc.vidfs.PlanSampler(m, rank=a.rank, world_size=a.world, seed=rc.SEED, clips="random", clips_per_video=K,
                             placement="node", nodes=a.nodes)
    video = [r["video"] for r in m.index()]  # each sample's video
    for e in range(a.epochs):
        s.set_epoch(e)
        t0, videos = time.time(), set()
        for i in s:
            m.read(i)
            videos.add(video[i])
            time.sleep(a.pace)
        c = copy_stats(a.mnt)
        print(json.dumps({"epoch": e + 1, "seconds": time.time() - t0, "videos": sorted(videos), "complete": c["complete"],
                          "idle_fills": c.get("idle_fills", 0)}), flush=True)


def two_nodes(source, cache_mem, epochs=6):
    """Two mounts (two nodes), each with its own copy (the defaults) and two ranks reading paced;
    each epoch, how many of the node's share's videos its copy holds whole."""
    out = {}
    dirs = [tempfile.mkdtemp(prefix="vidfs-copy-policy-node-", dir=rc.CACHE) for _ in range(2)]
    try:
        mounts = [rc.Mounted(source, ["--cache-mem", cache_mem, "--cache-dir", d],
                             os.path.join(rc.CACHE, "random-logs", "copy-policy-node%d.log" % n)) for n, d in enumerate(dirs)]
        for m in mounts:
            m.__enter__()
        try:
            procs = []
            for rank in range(4):
                node = rank // 2
                procs.append(subprocess.Popen(["/usr/bin/python3", os.path.abspath(__file__), "--rank-reader", "--mnt", mounts[node].dir,
                                               "--rank", str(rank), "--world", "4", "--nodes", "2", "--epochs", str(epochs),
                                               "--pace", str(PACE)], stdout=subprocess.PIPE, text=True))
            recs = [[json.loads(line) for line in p.communicate()[0].splitlines() if line.startswith("{")] for p in procs]
        finally:
            for m in mounts:
                m.__exit__(None, None, None)
    finally:
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)
    for node in range(2):
        share = set()
        for rank in (2 * node, 2 * node + 1):
            for r in recs[rank]:
                share |= set(r["videos"])
        out[node] = {"share": len(share), "complete": [max(recs[2 * node][e]["complete"], recs[2 * node + 1][e]["complete"])
                                                       for e in range(min(len(recs[2 * node]), len(recs[2 * node + 1])))]}
    return out


def served(run, e, prev):
    """Per epoch e: clips decoded, and served from the copy, as shares of its clips."""
    st = run["epochs"][e]["stats"]
    n = run["epochs"][e]["clips"]
    return ((st["decoded_clips"] - prev["decoded_clips"]) / n, (st.get("copy_hits", 0) - prev.get("copy_hits", 0)) / n)


def shares(run):
    prev, dec, hit = run["stats0"], [], []
    for e in range(len(run["epochs"])):
        d, h = served(run, e, prev)
        dec.append(d)
        hit.append(h)
        prev = run["epochs"][e]["stats"]
    return dec, hit


def rng(v, fmt):
    if len(v) == 1:
        return fmt % v[0]
    return (fmt + " (" + fmt + "-" + fmt + ")") % (statistics.median(v), min(v), max(v))


def report(res, est, written, fit, half, rounds, began, load, nodes=None):
    L = ["<!-- copypolicy:begin -->", "## The training copy at a real run's shape (issue 47, bench/copy_policy.py)", ""]
    L += ["Measured %s on %s, by `make bench-copy` (`bench/copy_policy.py --rounds %d`; load average %s at the start, %s at the"
          " end), taking turns (the order reversed every other round). 12 videos of 10 s at 480p (bench/dataset10.sh), `%s`,"
          " `PlanSampler(clips=\"random\", clips_per_video=%d)`, a DataLoader of batch 8 and 2 workers; vidfs's CPU is the"
          " mount's and its decoder helpers'. Paced: the trainer sleeps %.2f s a clip (bound by its GPU)." % (
              time.strftime("%Y-%m-%d", time.localtime(began)), machine(), rounds, load[0], load[1], " ".join(rc.SPEC), K, PACE), ""]
    L += ["| run | vidfs CPU per clip, each epoch, ms | clips decoded, each epoch | served from the copy | waited for clips, s |",
          "|---|---|---|---|---:|"]
    for name, runs in res.items():
        r0 = runs[0]
        dec, hit = shares(r0)
        L.append("| %s | %s | %s | %s | %s |" % (
            runs[0]["label"], " ".join("%.0f" % (1000 * x["vidfs_cpu_s_per_clip"]) for x in r0["epochs"]),
            " ".join("%.0f%%" % (100 * x) for x in dec), " ".join("%.0f%%" % (100 * x) for x in hit),
            rng([sum(x["waited_s"] for x in r["epochs"]) for r in runs], "%.1f")))
    L += ["", "(First round's epochs; waits over every round.)", ""]
    goals = []

    def ratio(a, b, e):
        return a["epochs"][e]["vidfs_cpu_s_per_clip"] / b["epochs"][e]["vidfs_cpu_s_per_clip"]

    if "paced" in res and "none-paced" in res:
        late = [max(shares(r)[0][2:6]) for r in res["paced"]]
        wait = [sum(x["waited_s"] for x in p["epochs"]) / sum(x["waited_s"] for x in n["epochs"]) for p, n in zip(res["paced"], res["none-paced"])]
        goals.append("- Paced, the defaults: epochs 3-6 decode at most %s of their clips (goal 5 %%: %s); the trainer waits %s as long for its clips"
                     " as without a copy (goal at most 1.1x: %s)." % (rng([100 * x for x in late], "%.0f %%"), met(max(late) <= 0.05),
                                                                     rng(wait, "%.2fx"), met(statistics.median(wait) <= 1.1)))
    if "defaults" in res and "none" in res:
        worst = [max(ratio(d, n, e) for e in range(6)) for d, n in zip(res["defaults"], res["none"])]
        late = [max(shares(r)[0][4:6]) for r in res["defaults"]]
        goals.append("- Flat out, the defaults: the worst epoch's vidfs CPU per clip %s no copy's (goal at most 1.3x: %s); epochs 5-6 decode"
                     " at most %s (goal 25 %%: %s)." % (rng(worst, "%.2fx"), met(statistics.median(worst) <= 1.3),
                                                         rng([100 * x for x in late], "%.0f %%"), met(max(late) <= 0.25)))
    if "told-10" in res and "none-10" in res:
        tot = [sum(x["vidfs_cpu_s_per_clip"] for x in t["epochs"]) / sum(x["vidfs_cpu_s_per_clip"] for x in n["epochs"])
               for t, n in zip(res["told-10"], res["none-10"])]
        worst = [max(ratio(t, n, e) for e in range(10)) for t, n in zip(res["told-10"], res["none-10"])]
        goals.append("- Told 10 epochs: the 10 epochs' vidfs CPU %s no copy's (goal at most 0.5x: %s), the worst epoch %s (goal at most"
                     " 3x: %s)." % (rng(tot, "%.2fx"), met(statistics.median(tot) <= 0.5), rng(worst, "%.2fx"),
                                    met(statistics.median(worst) <= 3)))
    for name, base in (("half-videos", "none"), ("half-paced", "none-paced")):
        if name in res and base in res:
            hits = [min(shares(r)[1][3:6]) for r in res[name]]
            cost = [sum(x["vidfs_cpu_s_per_clip"] for x in h["epochs"][3:6]) / sum(x["vidfs_cpu_s_per_clip"] for x in n["epochs"][3:6])
                    for h, n in zip(res[name], res[base])]
            goals.append("- Half fits (`--cache-disk %s`), %s: epochs 4-6 serve at least %s of their clips from the copy (goal 40 %%: %s) and"
                         " cost %s no copy's vidfs CPU (goal at most 1.05x: %s)." % (
                             half, res[name][0]["label"], rng([100 * x for x in hits], "%.0f %%"), met(min(hits) >= 0.4),
                             rng(cost, "%.2fx"), met(statistics.median(cost) <= 1.05)))
    goals.append("- The estimate: %.1f MB with huff, `vidfs copy` then wrote %.1f MB (%+.0f %%; goal within 25 %%: %s); at `--cache-disk %s`"
                 " a mount says `fits` %.2f with %s (goal: about one half)." % (est / 1e6, written / 1e6, 100 * (est - written) / written,
                                                                             met(abs(est - written) <= 0.25 * written), half, fit[0], fit[1]))
    if nodes:
        whole3 = [nodes[n]["complete"][2] >= nodes[n]["share"] if len(nodes[n]["complete"]) > 2 else False for n in nodes]
        goals.append("- Two nodes of two ranks, `PlanSampler(placement=\"node\")`, the defaults, paced: videos whole in each node's copy, each"
                     " epoch, of its share: %s (goal: the share whole by epoch 3: %s)." % (
                         "; ".join("node %s: %s of %d" % (n, " ".join(str(x) for x in nodes[n]["complete"]), nodes[n]["share"]) for n in nodes),
                         met(all(whole3))))
    L += ["### Against the goals", ""] + goals
    problems = ["%s round %d: %s" % (n, i + 1, r["log_problems"][0][:160]) for n, runs in res.items() for i, r in enumerate(runs) if r["log_problems"]]
    L += ["", "Mount logs, WARN and ERROR lines: %s." % ("; ".join(problems) if problems else "none"), "<!-- copypolicy:end -->"]
    return "\n".join(L)


def met(ok):
    return "met" if ok else "not met"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--only", help="run only these rows, comma-separated")
    ap.add_argument("--doc", help="write the section into this Markdown file")
    ap.add_argument("--rank-reader", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--mnt", help=argparse.SUPPRESS)
    ap.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--world", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--nodes", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--epochs", type=int, default=6, help=argparse.SUPPRESS)
    ap.add_argument("--pace", type=float, default=PACE, help=argparse.SUPPRESS)
    ap.add_argument("--no-nodes", action="store_true", help="leave out the two nodes' run")
    a = ap.parse_args()
    if a.rank_reader:
        return rank_reader(a)
    began, load = time.time(), ["%.2f" % os.getloadavg()[0]]
    os.makedirs(os.path.join(rc.CACHE, "random-logs"), exist_ok=True)
    source, _, _, lay = rc.prepare("480p-12", 480, 12)
    cache_mem, _ = rc.cache_mem_for(lay["samples"], lay["sample_bytes"])
    est, written = estimate(source, cache_mem)
    half = "%dMiB" % max(1, est // 2 >> 20)
    fit = fits_at(source, cache_mem, half)
    rc.log("the whole copy: estimated %.1f MB with huff, written %.1f MB; at --cache-disk %s fits %.2f (%s)" % (est / 1e6, written / 1e6, half, fit[0], fit[1]))
    rows = contenders(half)
    names = a.only.split(",") if a.only else list(rows)
    res = {n: [] for n in names}
    for r in range(a.rounds):
        for n in names if r % 2 == 0 else names[::-1]:
            t0 = time.time()
            out = run_one(n, rows[n], source, cache_mem, r + 1)
            out["label"] = rows[n][0]
            res[n].append(out)
            dec, hit = shares(out)
            rc.log("  round %d %-48s vidfs ms/clip %s; decoded %s; from the copy %s (%.0f s)" % (
                r + 1, rows[n][0], " ".join("%.0f" % (1000 * x["vidfs_cpu_s_per_clip"]) for x in out["epochs"]),
                " ".join("%.0f%%" % (100 * x) for x in dec), " ".join("%.0f%%" % (100 * x) for x in hit), time.time() - t0))
    nodes = None
    if not a.no_nodes:
        nodes = two_nodes(source, cache_mem)
        rc.log("  two nodes: %s" % nodes)
    load.append("%.2f" % os.getloadavg()[0])
    json.dump({"res": res, "est": est, "written": written, "fit": fit, "half": half, "nodes": nodes},
              open(os.path.join(rc.CACHE, "copy-policy-results.json"), "w"))
    text = report(res, est, written, fit, half, a.rounds, began, load, nodes)
    print(text)
    if a.doc:
        cur = open(a.doc).read()
        pat = re.compile(r"<!-- copypolicy:begin -->.*?<!-- copypolicy:end -->", re.S)
        cur = pat.sub(lambda m: text, cur) if pat.search(cur) else cur.rstrip("\n") + "\n\n" + text + "\n"
        open(a.doc, "w").write(cur)


if __name__ == "__main__":
    main()
