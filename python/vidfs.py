"""Reading a vidfs mount from Python: samples as NumPy arrays, a Dataset for PyTorch's DataLoader,
and a sampler that tells vidfs each epoch's order, one plan per reader, so that it decodes ahead.

NumPy is the only dependency; torch is imported only if it is installed (for DistributedSampler's
exact shuffle). The classes work with torch.utils.data.DataLoader without subclassing torch's.

    from vidfs import Mount, Dataset, PlanSampler
    mnt = Mount("/mnt/videos")
    sampler = PlanSampler(mnt, seed=0)      # under torchrun: this rank's share, plan "rank<N>"
                                            # (placement="node" on many nodes: each video on one)
    loader = torch.utils.data.DataLoader(Dataset(mnt), batch_size=8, num_workers=4, sampler=sampler)
    for epoch in range(10):
        sampler.set_epoch(epoch)
        for clips, labels in loader:         # clips: (8, T, H, W, 3) uint8
            ...
"""
import csv
import errno
import hashlib
import io
import json
import math
import numbers
import os
import socket
import warnings

import numpy as np

__all__ = ["Mount", "Dataset", "PlanSampler", "placement"]

# The version of vidfs, Python package and binary alike: the one place it is set (the binary
# embeds this file to read it; pyproject.toml reads it too).
__version__ = "0.2.0"


class Mount:
    """A vidfs mount point. read(i) returns sample i as a (T, H, W, 3) uint8 array.

    Samples are read from clips.npy with one pread() each (not through a memory map): every
    read reaches vidfs whole, and a sample that cannot be decoded raises OSError (EIO) instead
    of killing the process with SIGBUS, as a memory-mapped read of it would (unless the mount
    serves another sample in its place: vidfs mount --on-error substitute).
    """

    def __init__(self, path):
        self.path = path
        with open(os.path.join(path, ".vidfs", "layout.json")) as f:
            self.layout = json.load(f)
        lay = self.layout
        self.shape = (lay["frames"], lay["height"], lay["width"], lay["channels"])
        self.sample_bytes = lay["sample_bytes"]
        self.header = lay["npy_header_bytes"]  # sample i is at header + i * sample_bytes
        self._fd, self._pid = None, None
        self._index = None
        self._labels = None
        self._ranges = None
        self._names = None

    def __len__(self):
        return self.layout["samples"]

    def _file(self):
        # One descriptor per process: DataLoader workers are forked.
        if self._pid != os.getpid():
            self._fd, self._pid = os.open(os.path.join(self.path, "clips.npy"), os.O_RDONLY), os.getpid()
        return self._fd

    def read(self, i):
        """Sample i, shape (T, H, W, 3), uint8, in a fresh writable array."""
        if not 0 <= i < len(self):
            raise IndexError(i)
        size, off = self.sample_bytes, self.header + i * self.sample_bytes
        buf = np.empty(size, dtype=np.uint8)
        got = 0
        while got < size:  # vidfs may return short reads; finish the sample
            n = os.preadv(self._file(), [memoryview(buf)[got:]], off + got)
            if n == 0:
                raise OSError("short read of sample %d" % i)
            got += n
        return buf.reshape(self.shape)

    def array(self):
        """All samples as one memory-mapped array (N, T, H, W, 3)."""
        return np.load(os.path.join(self.path, "clips.npy"), mmap_mode="r")

    def index(self):
        """index.csv's rows: for each sample, its path, video, start frame, stride, label, class;
        on a mount with --fps (layout["fps"]), where start and stride count frames at that rate,
        also start_time and end_time: the seconds of its video the sample stands for. A list of
        dicts, read once: a few hundred bytes a sample (labels() and video_ranges() are the
        same as arrays)."""
        if self._index is None:
            with open(os.path.join(self.path, "index.csv")) as f:
                self._index = list(csv.DictReader(f))
        return self._index

    def _control(self, name):
        """.vidfs/NAME as a NumPy array, or None where the mount has no such file (a vidfs older
        than this package)."""
        try:
            arr = np.load(os.path.join(self.path, ".vidfs", name))
        except FileNotFoundError:
            return None
        arr.flags.writeable = False
        return arr

    def labels(self):
        """Each sample's label: the index of its class in classes.txt, or -1, as a read-only
        NumPy array of len(self), read once (from .vidfs/labels.npy). int64, as torch's losses
        take class indices, whichever way a dataset hands them on."""
        if self._labels is None:
            labels = self._control("labels.npy")
            if labels is None:
                labels = [int(row["label"]) for row in self.index()]
            self._labels = np.asarray(labels, dtype=np.int64)
            self._labels.flags.writeable = False
        return self._labels

    def video_ranges(self):
        """The videos that have samples, in clips.npy order: two int64 NumPy arrays, each
        video's first sample and its number of samples (read once, from .vidfs/videos.npy)."""
        if self._ranges is None:
            table = self._control("videos.npy")  # (videos, 3): first sample, samples, label
            if table is not None:
                has = table[:, 1] > 0
                first, count = table[has, 0], table[has, 1]
            else:
                videos = [row["video"] for row in self.index()]
                starts = [i for i in range(len(videos)) if i == 0 or videos[i] != videos[i - 1]]
                first = np.array(starts, dtype=np.int64)
                count = np.diff(np.append(first, len(videos)))
            self._ranges = (first, count)
        return self._ranges

    def video_names(self):
        """Each video's path relative to the source, in clips.npy order (a row of
        .vidfs/videos.npy each, videos without samples too), as .vidfs/videos.txt gives it: a
        list of bytes, with a backslash as \\\\, a newline as \\n and a carriage return as \\r.
        What placement() hashes."""
        if self._names is None:
            with open(os.path.join(self.path, ".vidfs", "videos.txt"), "rb") as f:
                lines = f.read().split(b"\n")
            if lines and lines[-1] == b"":
                lines.pop()
            self._names = lines
        return self._names

    def _video_table(self):
        """.vidfs/videos.npy: a row per video of its first sample, samples and label."""
        table = self._control("videos.npy")
        if table is None:
            raise OSError(errno.ENOENT, "%s/.vidfs/videos.npy: a vidfs older than this package" % self.path)
        return table

    def videos(self):
        """The samples of each video, in clips.npy order: a list of lists of sample indices
        (video_ranges() gives the same as two arrays, without a list per video)."""
        first, count = self.video_ranges()
        return [list(range(f, f + c)) for f, c in zip(first.tolist(), count.tolist())]

    def classes(self):
        with open(os.path.join(self.path, "classes.txt")) as f:
            return [line.rstrip("\n") for line in f if line.strip()]

    def plan_path(self, name=None):
        """The file of plan name: .vidfs/plans/NAME, or .vidfs/order for the default plan."""
        if name is None or name == "default":
            return os.path.join(self.path, ".vidfs", "order")
        return os.path.join(self.path, ".vidfs", "plans", name)

    def write_plan(self, order, append=False, name=None):
        """Tell vidfs the samples a reader is about to read, in order (any iterable of sample
        indices: a NumPy array, a list, a generator): plan name (one per reader, e.g. a DDP rank), or the default
        plan. append queues them behind the plan in force (the next epoch). An invalid plan
        raises OSError (EINVAL) and changes nothing. The plan is written as a binary .npy."""
        self._write_plan_parts([order], append, name)

    def _write_plan_parts(self, parts, append=False, name=None):
        """write_plan of the parts one after another, without joining them first."""
        arrs = [_plan_array(p) for p in parts]
        wide = any(a.size and (a.min() < -2**31 or a.max() >= 2**31) for a in arrs)
        arrs = [np.ascontiguousarray(a, dtype="<i8" if wide else "<i4") for a in arrs]
        total = sum(a.size for a in arrs)
        head = io.BytesIO()
        np.lib.format.write_array_header_1_0(head, {"descr": "<i8" if wide else "<i4", "fortran_order": False,
                                                    "shape": (total,)})
        with open(self.plan_path(name), "ab" if append else "wb", buffering=0) as f:
            for part in [head.getbuffer()] + [memoryview(a).cast("B") for a in arrs]:
                while part:  # a write to FUSE may be short
                    part = part[f.write(part):]

    def _tell_epochs(self, left):
        """Tell the mount that the run has left epochs to go (.vidfs/epochs); a mount too old to
        take it is left alone."""
        try:
            with open(os.path.join(self.path, ".vidfs", "epochs"), "w") as f:
                f.write("%d\n" % left)
        except OSError:
            pass

    def remove_plan(self, name):
        """Drop plan name, so that it holds no cache."""
        os.unlink(self.plan_path(name))

    def stats(self):
        """What vidfs is doing: hit rate, each plan's position and wait, decode rate, errors."""
        with open(os.path.join(self.path, ".vidfs", "stats")) as f:
            return json.load(f)

    def failed(self):
        """.vidfs/failed's rows: every sample that could not be decoded, at which frame, why, and
        what the mount serves in its place (a sample's index, "zeros" or "EIO")."""
        with open(os.path.join(self.path, ".vidfs", "failed")) as f:
            return list(csv.DictReader(f))


class Dataset:
    """A map-style dataset of (clip, label): clip is (T, H, W, 3) uint8, as a NumPy array.

    on_error says what a sample that cannot be decoded (OSError EIO) gives: "raise" raises it;
    "skip" warns once per sample and gives the next sample that can be read instead."""

    def __init__(self, mount, transform=None, on_error="raise"):
        if on_error not in ("raise", "skip"):
            raise ValueError("on_error %r: want 'raise' or 'skip'" % (on_error,))
        self.mount = mount if isinstance(mount, Mount) else Mount(mount)
        self.transform = transform
        self.on_error = on_error
        self._warned = set()
        # Read once, here, so that DataLoader's workers, forked after, share them.
        self._labels = self.mount.labels()

    def __len__(self):
        return len(self.mount)

    def __getitem__(self, i):
        n = len(self.mount)
        for k in range(n if self.on_error == "skip" else 1):
            j = (i + k) % n
            try:
                clip = self.mount.read(j)
            except OSError as e:
                if e.errno != errno.EIO or self.on_error != "skip":
                    raise
                if j not in self._warned:
                    self._warned.add(j)
                    warnings.warn("vidfs: sample %d cannot be decoded (see %s/.vidfs/failed); skipped" % (j, self.mount.path))
                continue
            if self.transform is not None:
                clip = self.transform(clip)
            return clip, int(self._labels[j])
        raise OSError(errno.EIO, "no sample from %d on can be decoded" % i)


def _dist_env():
    """This process's rank and the world size: torch.distributed's when it is initialised, else
    torchrun's environment (RANK, WORLD_SIZE), else 0 and 1."""
    try:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except ImportError:
        pass
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


_PLACEMENT = b"vidfs-placement-v1"
_MAX_NODES = 65536
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _mix(z):
    """SplitMix64's finaliser over a uint64 array (wrapping multiplication)."""
    z = np.asarray(z, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def _key(head, name):
    return int.from_bytes(hashlib.sha256(head + name).digest()[:8], "big")


def _node_name(n):
    """A node's name as bytes: a str (UTF-8), bytes, or a number (its decimal)."""
    if isinstance(n, str):
        return n.encode("utf-8", "surrogateescape")
    if isinstance(n, (bytes, bytearray)):
        return bytes(n)
    if isinstance(n, numbers.Integral):
        return str(int(n)).encode()
    raise TypeError("placement: a node's name is a str, bytes or a number, not %r" % (n,))


def placement(names, weights, seed, nodes):
    """The node of each video, as an index into nodes, or -1 for a video of weight 0: vidfs's
    placement rule, version 1 (docs/usage.md, "Many nodes"; the Go twin is placement.Assign,
    which vidfs copy --nodes and --hosts use). names are the videos' lines of .vidfs/videos.txt
    (Mount.video_names(); bytes, or str, encoded as UTF-8), weights what each weighs (its
    samples, or 1 a video), nodes the nodes' names (host names), or their number N (then named
    "0" to "N-1"). A pure function of its arguments: rendezvous hashing with bounded loads, so
    that the largest node holds within 1/64 of an even share where there are enough videos, and
    a node added or lost moves about its share. An int64 NumPy array."""
    if isinstance(nodes, numbers.Integral):
        nodes = [str(n) for n in range(int(nodes))]
    nodes = [_node_name(n) for n in nodes]
    N = len(nodes)
    if not 1 <= N <= _MAX_NODES:
        raise ValueError("placement over %d nodes: want 1 to %d" % (N, _MAX_NODES))
    if len(set(nodes)) != N:
        raise ValueError("placement: a node is listed twice in %r" % (nodes,))
    by_name = sorted(range(N), key=lambda n: nodes[n])  # the rule takes the nodes in order of name
    nodes = [nodes[n] for n in by_name]
    seed = int(seed)
    if not 0 <= seed < 2**64:
        raise ValueError("placement: seed %d: want 0 to 2**64 - 1" % seed)
    w = np.asarray(weights, dtype=np.int64)
    if len(w) != len(names):
        raise ValueError("placement: %d names for %d weights" % (len(names), len(w)))
    node = np.full(len(w), -1, dtype=np.int64)
    vids = np.nonzero(w > 0)[0]
    if len(vids) == 0:
        return node
    head = _PLACEMENT + b"\0" + str(seed).encode() + b"\0"
    keys = np.array([_key(head, n.encode("utf-8", "surrogateescape") if isinstance(n, str) else n)
                     for n in (names[v] for v in vids.tolist())], dtype=np.uint64)
    node_keys = np.array([_key(_PLACEMENT + b"\0node\0", n) for n in nodes], dtype=np.uint64)
    order = np.argsort(keys, kind="stable")  # positions in vids, in order of key
    # Each video's nodes, highest score first (ties: the earlier node), in rows of a few
    # thousand videos at a time, so that the scores are never held for every video at once.
    pref = np.empty((len(vids), N), dtype=np.int32 if N > 32767 else np.int16)
    rows = max(1, (1 << 22) // N)
    for a in range(0, len(vids), rows):
        score = _mix(keys[a:a + rows, None] ^ node_keys[None, :])
        pref[a:a + rows] = np.argsort(~score, axis=1, kind="stable")
    wv = w[vids]
    limit = -(-int(wv.sum()) * 65 // (64 * N))
    load = np.zeros(N, dtype=np.int64)
    got = np.full(len(vids), -1, dtype=np.int64)
    for r in range(N):
        left = order[got[order] < 0]  # not placed yet, in order of key
        if len(left) == 0:
            break
        prop = pref[left, r].astype(np.int64)
        by = np.argsort(prop, kind="stable")  # grouped by node, in order of key within each
        left, prop = left[by], prop[by]
        cs = np.cumsum(wv[left])
        starts = np.searchsorted(prop, np.arange(N))
        before = np.concatenate([[0], cs])[starts]  # the weight before each node's group
        cs = cs - before[prop] + load[prop]
        take = cs <= limit  # a prefix of each node's proposers
        got[left[take]] = prop[take]
        np.add.at(load, prop[take], wv[left[take]])
    for i in order[got[order] < 0].tolist():
        n = int(np.argmin(load))
        got[i] = n
        load[n] += wv[i]
    node[vids] = np.asarray(by_name, dtype=np.int64)[got]
    return node


def _node_env(world_size, nodes, how):
    """The number of nodes (nodes, or its length if a list of names, else torchrun's WORLD_SIZE /
    LOCAL_WORLD_SIZE or Slurm's SLURM_NNODES), and the node the environment says this process
    is on (torchrun's GROUP_RANK, Slurm's SLURM_NODEID), or None. A ValueError where they do
    not add up."""
    env = os.environ
    if "GROUP_RANK" in env and "SLURM_NODEID" in env and env["GROUP_RANK"] != env["SLURM_NODEID"]:
        raise ValueError("placement=%r: torchrun's GROUP_RANK=%s is not SLURM_NODEID=%s: torchrun's c10d rendezvous "
                         "numbers nodes by host name, not as Slurm does; start torchrun with --node-rank "
                         "\"$SLURM_NODEID\" (a static rendezvous), or use placement='host'"
                         % (how, env["GROUP_RANK"], env["SLURM_NODEID"]))
    said = env.get("GROUP_RANK", env.get("SLURM_NODEID"))
    said = None if said is None else int(said)
    if isinstance(nodes, (list, tuple)):
        nodes = len(nodes)
        local = env.get("LOCAL_WORLD_SIZE")
        if local is not None and int(local) * nodes != world_size:
            raise ValueError("placement=%r: %d nodes given, but LOCAL_WORLD_SIZE=%s ranks a node make %d of a world of %d"
                             % (how, nodes, local, world_size // max(1, int(local)), world_size))
        if "SLURM_NNODES" in env and int(env["SLURM_NNODES"]) != nodes:
            raise ValueError("placement=%r: %d nodes given, but SLURM_NNODES=%s" % (how, nodes, env["SLURM_NNODES"]))
    elif nodes is None:
        if "LOCAL_WORLD_SIZE" in env:
            local = int(env["LOCAL_WORLD_SIZE"])
            if local < 1 or world_size % local:
                raise ValueError("placement=%r: LOCAL_WORLD_SIZE=%d does not divide the world of %d" % (how, local, world_size))
            nodes = world_size // local
        elif "SLURM_NNODES" in env:
            nodes = int(env["SLURM_NNODES"])
        else:
            raise ValueError("placement=%r needs the number of nodes: give nodes=, or run under torchrun "
                             "(LOCAL_WORLD_SIZE) or Slurm (SLURM_NNODES)" % (how,))
    if not 1 <= nodes <= _MAX_NODES or world_size % nodes:
        raise ValueError("placement=%r: %d nodes do not divide the world of %d ranks" % (how, nodes, world_size))
    return nodes, said


def _plan_array(order):
    """A plan's sample indices as a 1-D integer NumPy array, from any iterable of them."""
    arr = np.asarray(order)
    if arr.dtype == object and arr.ndim == 0:  # an iterable that is not a sequence: a generator, a set
        arr = np.fromiter((int(i) for i in order), dtype=np.int64)
    elif arr.dtype.kind not in "iu":
        arr = np.array([int(i) for i in arr.ravel()], dtype=np.int64)
    return arr.ravel()


def _permutation(n, seed):
    """torch.randperm(n) from a generator seeded with seed, as DistributedSampler draws it; NumPy's
    (not the same order) where torch is not installed. A NumPy array."""
    try:
        import torch
    except ImportError:
        return np.random.default_rng(seed).permutation(n)
    g = torch.Generator()
    g.manual_seed(seed)
    return torch.randperm(n, generator=g).numpy()


def _draw(rng, count, k):
    """k sample numbers for each video of count[v] samples, drawn at random with rng, sorted:
    distinct where a video has k or more, else with repeats. An int64 array (videos, k)."""
    u = rng.random((len(count), k))
    pick = np.empty((len(count), k), dtype=np.int64)
    few = count < k
    pick[few] = (u[few] * count[few, None]).astype(np.int64)
    c, u = count[~few], u[~few]
    chosen = np.empty((len(c), 0), dtype=np.int64)
    for j in range(k):
        # The r-th of the c - j numbers not chosen yet: past each chosen one at or below it.
        r = (u[:, j] * (c - j)).astype(np.int64)
        for q in range(j):
            r += r >= chosen[:, q]
        chosen = np.sort(np.concatenate([chosen, r[:, None]], axis=1), axis=1)
    pick[~few] = chosen
    pick.sort(axis=1)
    return pick


class PlanSampler:
    """Yields this reader's samples for the epoch, and tells vidfs: before yielding, it writes them,
    followed by the next epoch's, to its plan (.vidfs/plans/NAME), so that vidfs decodes just ahead
    of the DataLoader's workers, across the end of the epoch too.

    With a rank and world size (by default torch.distributed's, else torchrun's RANK and
    WORLD_SIZE), it shuffles, pads and splits exactly as torch.utils.data.DistributedSampler does
    with the same seed, shuffle and drop_last, and set_epoch means what it means there; its plan
    is then named "rank<N>" (give name= for several jobs on one node). Without, the plan is the
    mount's default (.vidfs/order).

    Which samples make an epoch (mount a dense grid of samples per video with a small --step):
    clips="all" takes every sample; clips="random" draws clips_per_video random samples of each
    video each epoch (the same on every rank); clips="uniform" takes clips_per_video evenly spaced
    samples of each video, for evaluation. skip_failed leaves out the samples .vidfs/failed lists
    (then the split no longer matches DistributedSampler's, and ranks that read .vidfs/failed at
    different moments may disagree on the epoch's samples and lengths). epochs, if given, keeps the last
    epoch from planning one after it.

    placement="node" or "host", for a job over several nodes each with its own mount: each
    video is read on one node for the whole run (placement(), balanced by what an epoch reads: a
    video's samples with clips="all", the same for every video otherwise), so that each node's
    training copy holds only its share. "node" knows the nodes by their numbers (stable where the
    job starts each node with a fixed number: torchrun --node-rank, a Kubernetes Indexed Job);
    "host" by their host names (gathered under torch.distributed, or nodes=[names in node
    order]), so that a node lost or renumbered (torchrun's c10d rendezvous) moves only its own
    videos. Each epoch the node's ranks split its samples anew; each rank gets the same number
    (padded with the node's first ones again, or cut short with drop_last, as DistributedSampler
    does). The node count is nodes (or its length), else torchrun's (WORLD_SIZE /
    LOCAL_WORLD_SIZE) or Slurm's (SLURM_NNODES); ranks are numbered node by node (rank //
    (world_size / nodes) is the node), as torchrun and Slurm number them. Each global batch then
    holds a part from each node's share: docs/usage.md ("Many nodes") says when that matters."""

    def __init__(self, mount, rank=None, world_size=None, seed=0, shuffle=True, drop_last=False,
                 clips="all", clips_per_video=1, epochs=None, name=None, skip_failed=False,
                 placement=None, nodes=None):
        if clips not in ("all", "random", "uniform"):
            raise ValueError("clips %r: want 'all', 'random' or 'uniform'" % (clips,))
        if placement not in (None, "node", "host"):
            raise ValueError("placement %r: want None, 'node' or 'host'" % (placement,))
        self.mount = mount if isinstance(mount, Mount) else Mount(mount)
        env_rank, env_world = _dist_env()
        self.rank = env_rank if rank is None else rank
        self.world_size = env_world if world_size is None else world_size
        if not 0 <= self.rank < self.world_size:
            raise ValueError("rank %d of a world of %d" % (self.rank, self.world_size))
        self.seed, self.shuffle, self.drop_last = seed, shuffle, drop_last
        self.clips, self.clips_per_video, self.epochs = clips, clips_per_video, epochs
        self.skip_failed = skip_failed
        if name is None:
            name = "default" if self.world_size == 1 else "rank%d" % self.rank
        self.name = name
        self.placement, self.nodes, self.node, self._video_node = placement, 1, 0, None
        if placement is not None:
            self._place(nodes)
        self.epoch = 0
        self._orders = {}  # epoch -> this rank's order, an array, for this epoch and the next
        self._written = None  # the epoch whose plan vidfs has
        self._write()  # vidfs starts decoding while the trainer sets up

    def _place(self, nodes):
        """placement="node" or "host": the node count, this rank's node, its name, and each
        video's node (an index into the nodes, in rank order). Under torch.distributed every
        rank checks that every other places alike, and raises if any rank cannot (a collective:
        every rank builds its sampler, after torch.cuda.set_device under NCCL)."""
        how, err, names, weights = self.placement, None, None, None
        try:
            if not 0 <= int(self.seed) < 2**64:
                raise ValueError("placement=%r: seed %d: want 0 to 2**64 - 1" % (how, self.seed))
            count, said = _node_env(self.world_size, nodes, how)
            local = self.world_size // count
            self.nodes, self.node = count, self.rank // local
            if said is not None and said != self.node:
                raise ValueError("placement=%r: rank %d of %d, %d a node, is on node %d, but the environment says node %d "
                                 "(GROUP_RANK or SLURM_NODEID): vidfs wants ranks numbered node by node"
                                 % (how, self.rank, self.world_size, local, self.node, said))
            table = self.mount._video_table()
            names = self.mount.video_names()
            if len(names) != len(table):
                raise ValueError("%s: .vidfs/videos.txt has %d videos, .vidfs/videos.npy %d" % (self.mount.path, len(names), len(table)))
            weights = table[:, 1] if self.clips == "all" else (table[:, 1] > 0).astype(np.int64)
            given = [_node_name(n) for n in nodes] if isinstance(nodes, (list, tuple)) and how == "host" else None
        except Exception as e:  # raised on every rank, below, not on this one alone
            err, given = e, None
        digest = None
        if err is None:
            h = hashlib.sha256(b"\n".join(names))
            h.update(np.ascontiguousarray(weights, dtype="<i8").tobytes())
            digest = h.hexdigest()
        host = socket.gethostname()
        every = self._agree((self.nodes, self.world_size, self.seed, self.clips, self.clips_per_video, self.drop_last,
                             self.shuffle, self.skip_failed, digest, given), host, err)
        if how == "node":
            node_names = [str(n) for n in range(self.nodes)]
        elif given is not None:
            node_names = given
        elif every is not None:
            local = self.world_size // self.nodes
            node_names = []
            for n in range(self.nodes):
                hosts = {every[r][1] for r in range(n * local, (n + 1) * local)}
                if len(hosts) != 1:
                    raise ValueError("placement='host': the ranks of node %d run on %s: vidfs wants ranks numbered node "
                                     "by node" % (n, sorted(hosts)))
                node_names.append(hosts.pop())
            if len(set(node_names)) != self.nodes:
                raise ValueError("placement='host': two nodes on one host: %s" % node_names)
        else:
            raise ValueError("placement='host' needs the nodes' host names: run under torch.distributed (initialised "
                             "before the sampler), or give nodes=[host names, in node order]")
        self.node_names = node_names
        self._video_node = placement(names, weights, self.seed, node_names)

    def _agree(self, mine, host, err):
        """Under torch.distributed: gathers every rank's (mine, host, error); raises every
        rank's first error on every rank, or a ValueError naming the ranks whose mine differs
        from rank 0's; returns the gathered list. Without, raises err if any; returns None."""
        dist = None
        try:
            import torch.distributed as dist
            if not (dist.is_available() and dist.is_initialized()):
                dist = None
        except ImportError:
            pass
        if dist is None:
            if err is not None:
                raise err
            return None
        if dist.get_world_size() != self.world_size:
            err = err or ValueError("placement: world_size=%d, but torch.distributed's world holds %d ranks"
                                    % (self.world_size, dist.get_world_size()))
        every = [None] * dist.get_world_size()
        dist.all_gather_object(every, (mine, host, None if err is None else "%s: %s" % (type(err).__name__, err)))
        failed = [(r, e[2]) for r, e in enumerate(every) if e[2] is not None]
        if failed:
            if err is not None:
                raise err
            raise ValueError("placement: rank %d failed: %s" % failed[0])
        odd = [r for r, e in enumerate(every) if e[0] != every[0][0]]
        if odd:
            raise ValueError("placement: ranks %s place videos otherwise than rank 0 (nodes, world, seed, clips, clips per "
                             "video, drop_last, shuffle, skip_failed, videos, host names given): %r against %r"
                             % (odd, every[odd[0]][0], every[0][0]))
        return every

    def _every(self):
        """Whether an epoch's samples are every sample in order: 0, 1, ... len(mount) - 1."""
        return self.clips == "all" and not self.skip_failed

    def _drawn(self, epoch):
        """The epoch's samples before skip_failed, and the row of .vidfs/videos.npy of each
        sample's video (None with clips="all", where the video is found from the layout)."""
        if self.clips == "all":
            return np.arange(len(self.mount), dtype=np.int64), None
        first, count = self.mount.video_ranges()
        k = self.clips_per_video
        if self.clips == "random":
            pick = _draw(np.random.default_rng([self.seed, epoch]), count, k)
        else:
            j, c = np.arange(k), count[:, None]
            pick = np.minimum(c - 1, (j * c) // k + c // (2 * k))
        rows = np.nonzero(self.mount._video_table()[:, 1] > 0)[0] if self._video_node is not None else None
        return (first[:, None] + pick).ravel(), (None if rows is None else np.repeat(rows, k))

    def _unfailed(self, samples):
        """Which of samples .vidfs/failed does not list: a bool array."""
        failed = np.array([int(row["sample"]) for row in self.mount.failed()], dtype=np.int64)
        return ~np.isin(samples, failed)

    def _samples(self, epoch):
        """epoch_samples, as an int64 NumPy array."""
        samples, _ = self._drawn(epoch)
        if self.skip_failed:
            samples = samples[self._unfailed(samples)]
        return samples

    def epoch_samples(self, epoch=None):
        """The samples of an epoch, for all the ranks together, before shuffling: a list."""
        return self._samples(self.epoch if epoch is None else epoch).tolist()

    def _sizes(self, n):
        """DistributedSampler's num_samples and total_size for a dataset of n."""
        if self.drop_last and n % self.world_size != 0:
            per = math.ceil((n - self.world_size) / self.world_size)
        else:
            per = math.ceil(n / self.world_size)
        return per, per * self.world_size

    def _order(self, epoch):
        """This rank's samples for an epoch, in order: an int64 NumPy array, drawn once for the
        current epoch and the next (a plan holds both)."""
        if epoch in self._orders:
            return self._orders[epoch]
        if self._video_node is not None:
            order = self._node_order(epoch)
        else:
            order = self._split(epoch)
        self._orders = {e: o for e, o in self._orders.items() if e in (self.epoch, self.epoch + 1)}
        self._orders[epoch] = order
        return order

    def _node_order(self, epoch):
        """placement: this rank's share of its node's samples for an epoch, shuffled with the
        seed, the epoch and the node; every rank of every node gets as many, counted before
        skip_failed (each node's mount lists only its own videos' failures), so that no rank
        waits on another in DDP."""
        samples, rows = self._drawn(epoch)
        if rows is None:  # every sample: each video's samples in a run
            table = self.mount._video_table()
            where = np.repeat(self._video_node, table[:, 1])
        else:
            where = self._video_node[rows]
        local = self.world_size // self.nodes
        per_node = np.bincount(where[where >= 0], minlength=self.nodes)
        per = int(per_node.min()) // local if self.drop_last else -(-int(per_node.max()) // local)
        empty = np.nonzero(per_node == 0)[0]
        if len(empty) or per == 0:
            raise ValueError("placement=%r: epoch %d gives node(s) %s no samples (%d over %d nodes of %d ranks): more nodes "
                             "than videos?" % (self.placement, epoch, empty.tolist() or per_node.tolist(), len(samples),
                                               self.nodes, local))
        mine = samples[where == self.node]
        if self.skip_failed:
            kept = mine[self._unfailed(mine)]
            mine = kept if len(kept) else mine  # every one failed: read them, as without skip_failed
        idx = np.random.default_rng([self.seed, epoch, self.node]).permutation(len(mine)) if self.shuffle else np.arange(len(mine))
        idx = np.resize(idx, per * local)  # the first again, round and round, or cut short
        return mine[idx[self.rank % local::local]]

    def _split(self, epoch):
        """This rank's samples for an epoch, as DistributedSampler splits them."""
        samples = self._samples(epoch)
        n = len(samples)
        if n == 0:
            order = samples
        else:
            idx = _permutation(n, self.seed + epoch) if self.shuffle else np.arange(n)
            _, total = self._sizes(n)
            if not self.drop_last:
                # DistributedSampler's padding: the first indices again, round and round.
                idx = np.concatenate([idx, np.resize(idx, total - n)])
            pick = idx[self.rank:total:self.world_size]
            # With every sample, samples[i] is i: no gather of millions to make a copy of pick.
            order = pick if self._every() else samples[pick]
        return order

    def order(self, epoch=None):
        """This rank's samples for an epoch, in order: a list."""
        return self._order(self.epoch if epoch is None else epoch).tolist()

    def set_epoch(self, epoch):
        """Take epoch's samples (and seed), as DistributedSampler.set_epoch does, and tell vidfs."""
        self.epoch = epoch
        self._write()

    def _plan(self):
        """This epoch's order and, unless it is the last, the next one's: a list of arrays."""
        last = self.epochs is not None and self.epoch + 1 >= self.epochs
        if last:
            return [self._order(self.epoch)]
        return [self._order(self.epoch), self._order(self.epoch + 1)]

    def _write(self):
        """Write this epoch's plan, once: writing it again would restart vidfs's count. With epochs
        given, tell the mount how many are left (.vidfs/epochs), this one included: with four or
        more, its training copy may decode videos whole faster (it repays itself in the run)."""
        if self._written != self.epoch:
            self.mount._write_plan_parts(self._plan(), name=self.name)
            self._written = self.epoch
            if self.epochs is not None:
                self.mount._tell_epochs(max(0, self.epochs - self.epoch))

    def __iter__(self):
        self._write()
        return iter(self._order(self.epoch).tolist())

    def __len__(self):
        return len(self._order(self.epoch))
