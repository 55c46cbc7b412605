#!/usr/bin/python3
"""Runs one contender through a PyTorch DataLoader like a training loop, and measures it.

Each batch is followed by a simulated training step (sleep --step seconds). Prints one JSON
object: per-epoch times, clips/s, the fraction of wall time the trainer waited for data, CPU
seconds per clip (this process, its DataLoader workers, and the vidfs process when given),
peak resident memory (proportional set size, summed over the same processes), and for vidfs the
hit rate, seconds waited and decode amplification from .vidfs/stats.
"""
import argparse
import json
import os
import random
import resource
import sys
import threading
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import loaders  # noqa: E402
import vidfs  # noqa: E402  (loaders put python/ on the path)


def children(pid):
    """All descendants of pid."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            for task in os.listdir("/proc/%d/task" % p):
                with open("/proc/%d/task/%s/children" % (p, task)) as f:
                    kids = [int(x) for x in f.read().split()]
                out += kids
                todo += kids
        except OSError:
            pass
    return out


def pss_kb(pid):
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class MemoryMonitor(threading.Thread):
    """Samples the summed PSS of this process, its descendants and extra pids."""

    def __init__(self, extra):
        super().__init__(daemon=True)
        self.extra, self.peak, self.stop = extra, 0, threading.Event()

    def run(self):
        me = os.getpid()
        while not self.stop.wait(0.2):
            total = sum(pss_kb(p) for p in [me] + children(me) + self.extra)
            self.peak = max(self.peak, total)


class Shuffled:
    """A plain shuffling sampler (a new order each epoch), like DataLoader(shuffle=True)."""

    def __init__(self, n, seed):
        self.n, self.seed, self.epoch = n, seed, 0

    def set_epoch(self, e):
        self.epoch = e

    def __iter__(self):
        order = list(range(self.n))
        random.Random(self.seed * 100003 + self.epoch).shuffle(order)
        return iter(order)

    def __len__(self):
        return self.n


def epoch(loader, step, after_batch=None):
    """One epoch through loader, sleeping step seconds per batch (the training step), then calling
    after_batch (a collective, under DDP). Returns clips, seconds spent in next(loader), seconds."""
    e0, waited, clips = time.perf_counter(), 0.0, 0
    it = iter(loader)
    while True:
        t0 = time.perf_counter()
        try:
            batch, _ = next(it)
        except StopIteration:
            break
        waited += time.perf_counter() - t0
        clips += batch.shape[0]
        time.sleep(step)
        if after_batch:
            after_batch()
    return clips, waited, time.perf_counter() - e0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--contender", required=True, choices=["pyav", "opencv", "vidfs", "vidfs-plan", "npy"])
    ap.add_argument("--mnt", required=True, help="vidfs mount (its index.csv names the clips)")
    ap.add_argument("--source", required=True, help="the videos vidfs mounts")
    ap.add_argument("--ceiling", help="directory of pre-decoded samples (npy)")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--step", type=float, default=0.0, help="simulated training step per batch (s)")
    ap.add_argument("--vidfs-pid", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()

    torch.set_num_threads(1)
    data = loaders.make(a.contender, a.mnt, a.ceiling, a.source)
    mount = vidfs.Mount(a.mnt)
    sampler = vidfs.PlanSampler(mount, seed=a.seed, epochs=a.epochs) if a.contender == "vidfs-plan" else Shuffled(len(data), a.seed)
    loader = torch.utils.data.DataLoader(data, batch_size=a.batch, num_workers=a.workers, sampler=sampler)

    extra = [a.vidfs_pid] if a.vidfs_pid else []
    monitor = MemoryMonitor(extra)
    monitor.start()
    vidfs_cpu0 = cpu_seconds(a.vidfs_pid) if a.vidfs_pid else 0.0
    stats0 = mount.stats() if a.vidfs_pid else None
    epochs, clips, waited = [], 0, 0.0
    start = time.perf_counter()
    def cpu_now():  # this process and its ended children (each epoch's DataLoader workers), and vidfs
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime, cpu_seconds(a.vidfs_pid) if a.vidfs_pid else 0.0
    for e in range(a.epochs):
        sampler.set_epoch(e)
        c0, v0 = cpu_now()
        en, ew, secs = epoch(loader, a.step)
        c1, v1 = cpu_now()
        epochs.append({"seconds": secs, "clips": en, "waited": ew, "cpu_s": c1 - c0 + v1 - v0, "vidfs_cpu_s": v1 - v0})
        clips += en
        waited += ew
    wall = time.perf_counter() - start
    monitor.stop.set()
    monitor.join()
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    vidfs_cpu = cpu_seconds(a.vidfs_pid) - vidfs_cpu0 if a.vidfs_pid else 0.0
    result = {
        "contender": a.contender, "epochs": epochs, "clips": clips, "wall_s": wall,
        "clips_per_s": clips / wall, "wait_fraction": waited / wall,
        "cpu_s_per_clip": (cpu + vidfs_cpu) / clips, "vidfs_cpu_s": vidfs_cpu,
        "peak_pss_mib": monitor.peak / 1024, "step_s": a.step, "batch": a.batch, "workers": a.workers,
    }
    if stats0:
        st = mount.stats()
        h = st["cache"]["hits"] - stats0["cache"]["hits"]
        m = st["cache"]["misses"] - stats0["cache"]["misses"]
        served = st["decode"]["frames_served"] - stats0["decode"]["frames_served"]
        result.update({
            "hit_rate": h / max(h + m, 1),
            "vidfs_wait_s": st["reads"]["wait_s"] - stats0["reads"]["wait_s"],
            "amplification": (st["decode"]["frames_decoded"] - stats0["decode"]["frames_decoded"]) / max(served, 1),
            "decoded_clips": st["decode"]["clips"] - stats0["decode"]["clips"],
        })
    print(json.dumps(result))


if __name__ == "__main__":
    main()
