"""Checks PlanSampler against torch's DistributedSampler on a mount (argv[1]): the same split,
padding and shuffle for every rank, world size, seed, drop_last and epoch; the plans it writes;
clips="random" and "uniform"; Dataset's labels. Prints "ok" or fails with an assertion."""
import os
import sys

import torch.utils.data as tud
from vidfs import Dataset, Mount, PlanSampler

mnt = Mount(sys.argv[1])
n = len(mnt)
for world in (1, 3, 4):
    for drop_last in (False, True):
        for shuffle in (True, False):
            for seed in (0, 7):
                for rank in range(world):
                    ps = PlanSampler(mnt, rank=rank, world_size=world, seed=seed, shuffle=shuffle, drop_last=drop_last,
                                     name="t%d" % rank)
                    ds = tud.DistributedSampler(range(n), num_replicas=world, rank=rank, shuffle=shuffle, seed=seed,
                                                drop_last=drop_last)
                    for epoch in (0, 1, 5):
                        ps.set_epoch(epoch)
                        ds.set_epoch(epoch)
                        assert list(ps) == list(ds), (world, drop_last, shuffle, seed, rank, epoch)
                        assert len(ps) == len(ds)
                    # Its plan: this epoch's order, then the next one's.
                    with open(mnt.plan_path("t%d" % rank)) as f:
                        plan = [int(x) for x in f.read().split()]
                    assert plan == ps.order(5) + ps.order(6), "plan t%d" % rank
for rank in range(4):
    mnt.remove_plan("t%d" % rank)
assert os.listdir(os.path.join(sys.argv[1], ".vidfs", "plans")) == [], "plans left after removing them"

# Clip choice: k random samples of each video each epoch, the same on every rank; uniform ones.
videos = mnt.videos()
for clips in ("random", "uniform"):
    k = 2
    per_rank = [PlanSampler(mnt, rank=r, world_size=2, clips=clips, clips_per_video=k, seed=3, name="c%d" % r) for r in range(2)]
    for epoch in (0, 1):
        for ps in per_rank:
            ps.set_epoch(epoch)
        want = per_rank[0].epoch_samples()
        assert want == per_rank[1].epoch_samples(), "ranks disagree on the epoch's clips"
        assert len(want) == k * len(videos)
        for v in videos:
            assert len([s for s in want if s in v]) == k, (clips, v)
        got = sorted(set(per_rank[0].order()) | set(per_rank[1].order()))
        assert got == sorted(set(want)), (clips, epoch)
    if clips == "random":
        assert per_rank[0].epoch_samples(0) != per_rank[0].epoch_samples(1), "random clips the same every epoch"
    else:
        assert per_rank[0].epoch_samples(0) == per_rank[0].epoch_samples(1)
    for r in range(2):
        mnt.remove_plan("c%d" % r)

# write_plan takes any iterable of sample numbers, as it did when it wrote them as text.
import numpy as np
import torch
for name, order in (("list", [3, 1, 2]), ("range", range(3, 0, -1)), ("gen", (i for i in (2, 0, 1))), ("set", {4}),
                    ("tuple", (1, 1)), ("int32", np.array([2, 3], dtype=np.int32)), ("npints", [np.int64(5), np.int16(0)]),
                    ("tensor", torch.tensor([0, 4])), ("empty", [])):
    want = [int(i) for i in order] if name != "gen" else [2, 0, 1]
    mnt.write_plan(order, name="w")
    with open(mnt.plan_path("w")) as f:
        assert [int(x) for x in f.read().split()] == want, (name, want)
mnt.remove_plan("w")

# Labels come from index.csv.
ds = Dataset(mnt)
classes = mnt.classes()
for i in (0, n // 2, n - 1):
    clip, label = ds[i]
    row = mnt.index()[i]
    assert clip.shape == mnt.shape and label == int(row["label"])
    assert label < 0 or row["video"].split("/")[0] == classes[label]
print("ok")
