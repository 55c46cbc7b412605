"""PlanSampler(placement="node") over two nodes, each a mount of the same videos (argv[1],
argv[2]), two ranks a node, random clips: run EPOCHS epochs from FIRST (argv[3], argv[4]),
reading every rank's samples from its node's mount, and check, each epoch, that the four ranks
together read each video's clips_per_video clips once (the padding aside), that each rank reads
as many, that a node reads only its videos, and that the ranks built in any order place alike.
Prints a JSON line: per epoch and node, the samples read and those vidfs decoded; the
placement; the share of videos moved going to 3 nodes."""
import json
import os
import sys

import numpy as np
from vidfs import Mount, PlanSampler, placement

mounts = [Mount(sys.argv[1]), Mount(sys.argv[2])]
first_epoch, epochs = int(sys.argv[3]), int(sys.argv[4])
K, SEED, NODES, LOCAL = 2, 5, 2, 2
WORLD = NODES * LOCAL


def decoded(m):
    with open(os.path.join(m.path, ".vidfs", "stats")) as f:
        return json.load(f)["decode"]["clips"]


# The ranks start in any order; each finds the same placement.
samplers = {}
for rank in (3, 0, 2, 1):
    node = rank // LOCAL
    samplers[rank] = PlanSampler(mounts[node], rank=rank, world_size=WORLD, seed=SEED, clips="random", clips_per_video=K,
                                 placement="node", nodes=NODES)
where = samplers[0]._video_node
for rank, ps in samplers.items():
    assert np.array_equal(ps._video_node, where), "rank %d places videos otherwise" % rank
    assert ps.node == rank // LOCAL

table = mounts[0]._video_table()
has = table[:, 1] > 0
first, count = table[has, 0], table[has, 1]
video_of = np.repeat(np.nonzero(has)[0], count)  # sample -> video (row of videos.npy)

out = {"epochs": [], "videos": [int((where == n).sum()) for n in range(NODES)]}
for epoch in range(first_epoch, first_epoch + epochs):
    before = [decoded(m) for m in mounts]
    orders = {}
    for rank in sorted(samplers):
        samplers[rank].set_epoch(epoch)
        orders[rank] = samplers[rank].order()
    lens = {len(o) for o in orders.values()}
    assert len(lens) == 1, "epoch %d: ranks read %s samples" % (epoch, lens)
    # Every rank of a node reads its node's videos only.
    for rank, o in orders.items():
        nodes_read = set(where[video_of[o]].tolist())
        assert nodes_read <= {rank // LOCAL}, "epoch %d: rank %d reads videos of nodes %s" % (epoch, rank, nodes_read)
    # Together: each video's K clips, the epoch's draw, once each, but for the padding.
    want = np.sort(samplers[0]._samples(epoch))
    got = np.sort(np.concatenate(list(orders.values())))
    missing = np.setdiff1d(want, got)
    assert len(missing) == 0, "epoch %d: samples not read: %s" % (epoch, missing[:10])
    padding = WORLD * len(orders[0]) - len(want)
    extra = len(got) - len(want)
    assert extra == padding, "epoch %d: %d samples read more than once, the padding is %d" % (epoch, extra, padding)
    # Read them, rank by rank taking turns, from the rank's node.
    for j in range(len(orders[0])):
        for rank in sorted(orders):
            mounts[rank // LOCAL].read(orders[rank][j])
    after = [decoded(m) for m in mounts]
    out["epochs"].append({"epoch": epoch, "read": [len(orders[0]) * LOCAL] * NODES,
                          "decoded": [a - b for a, b in zip(after, before)], "padding": padding})

# Going from 2 nodes to 3: how many videos move.
names = mounts[0].video_names()
weights = has.astype(np.int64)
two, three = placement(names, weights, SEED, 2), placement(names, weights, SEED, 3)
out["moved_2_to_3"] = float((two[has] != three[has]).mean())
out["node0"] = np.nonzero(where == 0)[0].tolist()
out["node0_samples"] = np.nonzero(where[video_of] == 0)[0].tolist()

# Wrong setups are refused with the reason.
for kw, env, words in (({"nodes": 3}, {}, "do not divide"), ({"nodes": 2}, {"GROUP_RANK": "0"}, "environment says node 0"),
                       ({}, {}, "needs the number of nodes")):
    saved = dict(os.environ)
    for k in ("GROUP_RANK", "SLURM_NODEID", "LOCAL_WORLD_SIZE", "SLURM_NNODES"):
        os.environ.pop(k, None)
    os.environ.update(env)
    try:
        PlanSampler(mounts[1], rank=3, world_size=4, seed=SEED, clips="random", placement="node", name="x", **kw)
    except ValueError as e:
        assert words in str(e), (kw, env, str(e))
    else:
        raise AssertionError("PlanSampler(%s) with %s: no error" % (kw, env))
    finally:
        os.environ.clear()
        os.environ.update(saved)
print(json.dumps(out))
