"""PlanSampler(placement="node") over two nodes of two ranks, random clips.

nodes.py job A B FIRST EPOCHS: each node a mount of the same videos (A, B); run EPOCHS epochs
from FIRST, reading every rank's samples from its node's mount, and check, each epoch, that the
four ranks together read each video's clips_per_video clips once (the padding aside), that each
rank reads as many, and that a node reads only its videos. Prints a JSON line: per epoch and
node, the samples read and those vidfs decoded.

nodes.py checks MNT (a mount without a training copy: the samplers here write plans): without
reading, placement="host", drop_last, skip_failed, every sample, the node count from torchrun's or
Slurm's environment, and the setups refused. Prints a JSON line: node 0's videos and samples,
node "hostA"'s under placement="host" over hostB and hostA, the share of videos moved going
to 3 nodes."""
import json
import os
import sys
import time

import numpy as np
from vidfs import Mount, PlanSampler, placement

K, SEED, NODES, LOCAL = 2, 5, 2, 2
WORLD = NODES * LOCAL
mode = sys.argv[1]
mounts = [Mount(p) for p in (sys.argv[2:4] if mode == "job" else sys.argv[2:3])]
table = mounts[0]._video_table()
has = table[:, 1] > 0
video_of = np.repeat(np.nonzero(has)[0], table[has, 1])  # sample -> video (row of videos.npy)


def decoded(m):
    with open(os.path.join(m.path, ".vidfs", "stats")) as f:
        return json.load(f)["decode"]["clips"]


def settle(m):
    """Waits (30 s at most) for m's whole-video decodes under way to end and reach the disk: an
    epoch of 50 clips is shorter than the fills it starts, where a trainer's epoch of thousands
    is not."""
    for _ in range(3000):
        with open(os.path.join(m.path, ".vidfs", "stats")) as f:
            c = json.load(f)["copy"]
        if c["filling"] == 0 and c["fill_queued"] == 0 and c["backlog"] == 0:
            return
        time.sleep(0.01)


def job(first_epoch, epochs):
    samplers = {}
    for rank in range(WORLD):
        node = rank // LOCAL
        samplers[rank] = PlanSampler(mounts[node], rank=rank, world_size=WORLD, seed=SEED, clips="random",
                                     clips_per_video=K, placement="node", nodes=NODES)
        assert samplers[rank].node == node
    where = samplers[0]._video_node
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
        assert len(got) - len(want) == padding, "epoch %d: %d samples read more than once, the padding is %d" % (
            epoch, len(got) - len(want), padding)
        # Read them, rank by rank taking turns, from the rank's node.
        for j in range(len(orders[0])):
            for rank in sorted(orders):
                mounts[rank // LOCAL].read(orders[rank][j])
        after = [decoded(m) for m in mounts]
        for m in mounts:
            settle(m)
        out["epochs"].append({"epoch": epoch, "read": [len(orders[0]) * LOCAL] * NODES,
                              "decoded": [a - b for a, b in zip(after, before)], "padding": padding})
    return out


ENV = ("GROUP_RANK", "SLURM_NODEID", "LOCAL_WORLD_SIZE", "SLURM_NNODES")


def sampler(rank, env=None, **kw):
    """A sampler of rank of WORLD on mount 0 that writes no plan of the job's, in env."""
    saved = dict(os.environ)
    for k in ENV:
        os.environ.pop(k, None)
    os.environ.update(env or {})
    try:
        args = dict(rank=rank, world_size=WORLD, seed=SEED, clips="random", clips_per_video=K, name="x%d" % rank)
        args.update(kw)
        return PlanSampler(mounts[0], **args)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def check_epoch(ranks, epoch, drop_last=False):
    """The ranks' orders of epoch: as many each; each rank's node's videos only; together every
    sample drawn, the padding aside (or none twice, with drop_last)."""
    orders = [r.order(epoch) for r in ranks]
    assert len({len(o) for o in orders}) == 1, [len(o) for o in orders]
    for r, o in zip(ranks, orders):
        assert set(r._video_node[video_of[o]].tolist()) <= {r.node}, "rank %d reads another node's videos" % r.rank
    got, want = np.sort(np.concatenate(orders)), np.sort(ranks[0]._samples(epoch))
    if drop_last:
        assert len(np.unique(got)) == len(got), "drop_last: a sample read twice"
        assert len(want) - len(got) < WORLD * LOCAL * K, "drop_last dropped %d of %d" % (len(want) - len(got), len(want))
    else:
        assert len(np.setdiff1d(want, got)) == 0 and len(got) - len(want) == WORLD * len(orders[0]) - len(want)
    return orders


def checks():
    out = {}
    where = sampler(0, placement="node", nodes=NODES)._video_node
    names = mounts[0].video_names()
    weights = has.astype(np.int64)
    out["node0"] = np.nonzero(where == 0)[0].tolist()
    out["node0_samples"] = np.nonzero(where[video_of] == 0)[0].tolist()
    # Going from 2 nodes to 3: how many videos move.
    two, three = placement(names, weights, SEED, 2), placement(names, weights, SEED, 3)
    out["moved_2_to_3"] = float((two[has] != three[has]).mean())
    # placement="host": the nodes known by name; the same rule as vidfs copy --hosts.
    hosts = ["hostB", "hostA"]  # node 0 runs on hostB, node 1 on hostA
    by_host = [sampler(r, placement="host", nodes=hosts) for r in range(WORLD)]
    assert np.array_equal(by_host[0]._video_node, placement(names, weights, SEED, hosts))
    for e in range(2):
        check_epoch(by_host, e)
    as_bytes = sampler(0, placement="host", nodes=[b"hostB", b"hostA"])
    assert np.array_equal(as_bytes._video_node, by_host[0]._video_node), "host names as bytes place otherwise"
    host_a = np.nonzero(by_host[0]._video_node == 1)[0]  # the videos of hostA
    out["host_a"] = host_a.tolist()
    out["host_a_samples"] = np.nonzero(np.isin(video_of, host_a))[0].tolist()

    # drop_last, skip_failed (nothing failed here: the same as without), every sample (clips="all").
    for kw in ({"drop_last": True}, {"skip_failed": True}, {"clips": "all"}, {"clips": "uniform", "shuffle": False}):
        ranks = [sampler(r, placement="node", nodes=NODES, **kw) for r in range(WORLD)]
        for e in range(2):
            check_epoch(ranks, e, kw.get("drop_last", False))

    # The node count from torchrun's environment, or Slurm's.
    for env in ({"LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "1"}, {"SLURM_NNODES": "2", "SLURM_NODEID": "1"}):
        s = sampler(3, env, placement="node")
        assert (s.nodes, s.node) == (2, 1) and np.array_equal(s._video_node, where), env

    # Refused with the reason: every rank raises alike where a node would have nothing to read.
    for kw, env, words in (({"nodes": 3}, {}, "do not divide"), ({"nodes": 2}, {"GROUP_RANK": "0"}, "environment says node 0"),
                           ({}, {}, "needs the number of nodes"),
                           ({}, {"GROUP_RANK": "1", "SLURM_NODEID": "0", "LOCAL_WORLD_SIZE": "2"}, "c10d"),
                           ({"placement": "host"}, {"LOCAL_WORLD_SIZE": "2"}, "host names"),
                           ({"placement": "host", "nodes": ["a", "b", "c", "d"]}, {"LOCAL_WORLD_SIZE": "2"}, "LOCAL_WORLD_SIZE=2"),
                           ({"nodes": 4, "world_size": 4}, {}, None)):
        kw = dict({"placement": "node"}, **kw)
        try:
            s = sampler(3, env, **kw)
            if words is None:  # 4 nodes of 1 rank, fewer videos than nodes never: 48 videos; force one
                s._video_node = np.where(s._video_node == 2, 1, s._video_node)  # node 2 left with nothing
                words = "no samples"
                s.order(5)  # an epoch not drawn yet
        except ValueError as e:
            assert words in str(e), (kw, env, str(e))
        else:
            raise AssertionError("PlanSampler(%s) with %s: no error" % (kw, env))
    return out


if mode == "job":
    print(json.dumps(job(int(sys.argv[4]), int(sys.argv[5]))))
else:
    print(json.dumps(checks()))
