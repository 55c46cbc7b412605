"""A real torch.distributed run (gloo, CPU) over a vidfs mount, launched as torchrun launches a
trainer: WORLD ranks x 2 DataLoader workers, each with PlanSampler (seed 11), for 2 epochs. The
decoders, not a clock, set the ranks' pace: a worker reads a sample once vidfs has the rank's next
samples ready (wait_ready), so that a slow machine slows the ranks as much as the decoders. Each
rank notes what it read and its plan's hits and misses after its first batch and at the end. Then
one process checks what the ranks read against DistributedSampler and a single-process read of
every sample, and prints a JSON summary, with the decodes the mount's stats counted during the run.

usage: PYTHONPATH=python/ ddp.py MNT PORT WORLD
(each rank runs as: ddp.py --rank MNT OUT, with torchrun's environment)"""
import hashlib
import json
import os
import sys
import tempfile
import time

import torch.distributed as dist
import subprocess
import torch.utils.data as tud
from vidfs import Dataset, Mount, PlanSampler

EPOCHS, SEED = 2, 11
BATCH, WORKERS, PREFETCH = 4, 2, 2  # the DataLoader's batch size, workers, and batches each worker is given ahead
AHEAD = BATCH * WORKERS * PREFETCH  # how far past its plan's position a rank's workers may be reading


def wait_ready(m, name):
    """Waits as a reader no faster than the decoders would: until the next AHEAD samples of the
    plan called name are ready (as many as are left of it), the mount's decoders have nothing left
    to do, or they have decoded a cache's worth of samples meanwhile, whichever comes first."""
    began = None
    while True:
        st = m.stats()
        d = st["decode"]
        began = d["clips"] if began is None else began
        p = next((p for p in st["plans"] if p["name"] == name), None)
        if (p is None or p["ready_ahead"] >= min(AHEAD, p["length"] - p["position"]) or d["in_flight"] + d["queued"] == 0
                or d["clips"] - began >= st["cache"]["capacity_samples"]):
            return
        time.sleep(0.01)


class Hashed(Dataset):
    """Each sample's index and SHA-256, instead of its pixels, read once wait_ready returns for
    the plan called plan (the rank's)."""

    def __init__(self, mount, plan):
        super().__init__(mount)
        self.plan = plan

    def __getitem__(self, i):
        wait_ready(self.mount, self.plan)
        clip, _ = super().__getitem__(i)
        return i, hashlib.sha256(clip.tobytes()).hexdigest()


def rank_main(mnt, out):
    dist.init_process_group("gloo")  # rank, world size and rendezvous from torchrun's environment
    m = Mount(mnt)
    sampler = PlanSampler(m, seed=SEED, epochs=EPOCHS)  # rank and world size from torch.distributed
    loader = tud.DataLoader(Hashed(m, sampler.name), batch_size=BATCH, num_workers=WORKERS, prefetch_factor=PREFETCH,
                            sampler=sampler, collate_fn=list)

    def counts():
        for p in m.stats()["plans"]:
            if p["name"] == sampler.name:
                return [p["hits"], p["misses"], p["wait_s"]]
        return [0, 0, 0.0]

    read, first = {}, None
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        read[epoch] = []
        for batch in loader:
            read[epoch].extend(batch)
            if first is None:
                first = counts()
    dist.barrier()
    with open(os.path.join(out, "rank%d.json" % dist.get_rank()), "w") as f:
        json.dump({"name": sampler.name, "read": read, "first": first, "end": counts()}, f)
    dist.barrier()
    dist.destroy_process_group()


def main():
    mnt, port, world = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    out = tempfile.mkdtemp()
    m = Mount(mnt)
    before = m.stats()
    began = time.time()
    # What torchrun does for one node: a process per rank, told its place by the environment.
    # (Debian 12's torchrun, torch 1.13 on Python 3.11, fails at start unless its output is
    # redirected to files: its Std flags lost NONE in 3.11's enum.)
    ranks = []
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        ranks.append(subprocess.Popen([sys.executable, __file__, "--rank", mnt, out], env=env, stdout=sys.stderr))
    if any(p.wait() != 0 for p in ranks):
        sys.exit("a rank failed")
    seconds = time.time() - began
    after = m.stats()
    n = len(m)
    single = {i: hashlib.sha256(m.read(i).tobytes()).hexdigest() for i in range(n)}
    summary = {"samples": n, "seconds": seconds, "ranks": [], "split_ok": True, "bytes_ok": True, "read": 0,
               "distinct": 0, "decodes": after["decode"]["clips"] - before["decode"]["clips"],
               "evicted_unread": after["cache"]["evicted_unread"] - before["cache"]["evicted_unread"]}
    distinct = set()
    for rank in range(world):
        with open(os.path.join(out, "rank%d.json" % rank)) as f:
            r = json.load(f)
        for epoch in range(EPOCHS):
            ds = tud.DistributedSampler(range(n), num_replicas=world, rank=rank, shuffle=True, seed=SEED)
            ds.set_epoch(epoch)
            got = r["read"][str(epoch)]
            if [i for i, _ in got] != list(ds):
                summary["split_ok"] = False
            if any(single[i] != h for i, h in got):
                summary["bytes_ok"] = False
            summary["read"] += len(got)
            distinct.update(i for i, _ in got)
        hits, misses = r["end"][0] - r["first"][0], r["end"][1] - r["first"][1]
        summary["ranks"].append({"name": r["name"], "hits_after_first_batch": hits, "misses_after_first_batch": misses,
                                 "hit_rate": hits / max(hits + misses, 1), "wait_s": r["end"][2]})
    summary["distinct"] = len(distinct)
    print(json.dumps(summary))


if __name__ == "__main__":
    if sys.argv[1] == "--rank":
        rank_main(sys.argv[2], sys.argv[3])
    else:
        main()
