#!/usr/bin/python3
"""Runs one contender as a torch.distributed job on one node, and measures it: WORLD ranks (gloo,
CPU), launched as torchrun launches them, each with a DataLoader of WORKERS workers over its
DistributedSampler share of the clips, a simulated training step per batch (sleep --step) and a
gradient all-reduce per step, as DistributedDataParallel does, which keeps the ranks in step.

  pyav        PyAV Dataset (bench/loaders.py) with torch's DistributedSampler
  vidfs-plan  vidfs Dataset with vidfs.PlanSampler: the same split, written to the mount as one
              plan per rank, all on one mount

Prints one JSON object: clips/s over all ranks, the share of wall time the ranks waited for data
(mean over ranks), CPU seconds per clip (every rank, its DataLoader workers and the vidfs process
when given) and peak memory (their summed proportional set sizes), and for vidfs the hit rate
and decodes from .vidfs/stats.

usage: ddp.py --contender C --mnt M --source S [--world 2 --workers 1 --epochs 2 --batch 8
              --step 0 --vidfs-pid P]
"""
import argparse
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train  # noqa: E402  (its process and memory measures)


def rank_main(a, out):
    import torch
    import torch.distributed as dist
    import loaders
    import vidfs
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    data = loaders.make(a.contender, a.mnt, None, a.source)
    if a.contender == "vidfs-plan":
        sampler = vidfs.PlanSampler(vidfs.Mount(a.mnt), seed=a.seed, epochs=a.epochs)
    else:
        sampler = torch.utils.data.DistributedSampler(data, seed=a.seed)
    loader = torch.utils.data.DataLoader(data, batch_size=a.batch, num_workers=a.workers, sampler=sampler)
    grad = torch.zeros(1)
    dist.barrier()
    clips, waited, start = 0, 0.0, time.perf_counter()
    for epoch in range(a.epochs):
        sampler.set_epoch(epoch)
        n, w, _ = train.epoch(loader, a.step, lambda: dist.all_reduce(grad))
        clips, waited = clips + n, waited + w
    wall = time.perf_counter() - start
    with open(os.path.join(out, "rank%d.json" % rank), "w") as f:
        json.dump({"clips": clips, "waited": waited, "wall": wall}, f)
    dist.barrier()
    dist.destroy_process_group()


def launch(a):
    out = tempfile.mkdtemp(prefix="vidfs-ddp-")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    extra = [a.vidfs_pid] if a.vidfs_pid else []
    monitor = train.MemoryMonitor(extra)
    monitor.start()
    vidfs_cpu0 = train.cpu_seconds(a.vidfs_pid) if a.vidfs_pid else 0.0
    mount = None
    if a.vidfs_pid:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
        import vidfs
        mount = vidfs.Mount(a.mnt)
        stats0 = mount.stats()
    ranks = []
    for rank in range(a.world):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(a.world),
                   LOCAL_WORLD_SIZE=str(a.world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        ranks.append(subprocess.Popen([sys.executable, __file__, *sys.argv[1:], "--rank-out", out], env=env))
    if any(p.wait() != 0 for p in ranks):
        sys.exit("ddp.py: a rank failed")
    monitor.stop.set()
    monitor.join()
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = kids.ru_utime + kids.ru_stime
    vidfs_cpu = train.cpu_seconds(a.vidfs_pid) - vidfs_cpu0 if a.vidfs_pid else 0.0
    rs = []
    for rank in range(a.world):
        with open(os.path.join(out, "rank%d.json" % rank)) as f:
            rs.append(json.load(f))
    clips = sum(r["clips"] for r in rs)
    wall = max(r["wall"] for r in rs)
    result = {"contender": a.contender, "world": a.world, "workers": a.workers, "clips": clips, "wall_s": wall,
              "clips_per_s": clips / wall, "wait_fraction": sum(r["waited"] / r["wall"] for r in rs) / len(rs),
              "cpu_s_per_clip": (cpu + vidfs_cpu) / clips, "vidfs_cpu_s": vidfs_cpu, "python_cpu_s": cpu, "peak_pss_mib": monitor.peak / 1024, "step_s": a.step}
    if mount is not None:
        st = mount.stats()
        h = st["cache"]["hits"] - stats0["cache"]["hits"]
        m = st["cache"]["misses"] - stats0["cache"]["misses"]
        result.update({"hit_rate": h / max(h + m, 1), "decoded_clips": st["decode"]["clips"] - stats0["decode"]["clips"]})
    print(json.dumps(result))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--contender", required=True, choices=["pyav", "vidfs-plan"])
    ap.add_argument("--mnt", required=True, help="vidfs mount (its index.csv names the clips)")
    ap.add_argument("--source", required=True, help="the videos vidfs mounts")
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--step", type=float, default=0.0, help="simulated training step per batch (s)")
    ap.add_argument("--vidfs-pid", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rank-out", help=argparse.SUPPRESS)  # set for the rank processes
    a = ap.parse_args()
    if a.rank_out:
        rank_main(a, a.rank_out)
    else:
        launch(a)


if __name__ == "__main__":
    main()
