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
import os
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
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _mix(z):
    """SplitMix64's finaliser over a uint64 array (wrapping multiplication)."""
    z = np.asarray(z, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def placement(names, weights, seed, nodes):
    """The node (0 .. nodes - 1) of each video, or -1 for a video of weight 0: vidfs's placement
    rule, version 1 (docs/usage.md, "Many nodes"; the Go twin is placement.Assign, which vidfs
    copy --nodes uses). names are the videos' lines of .vidfs/videos.txt (bytes:
    Mount.video_names()), weights what each weighs (its samples, or 1 a video). A pure function
    of its arguments: rendezvous hashing with bounded loads, so that nodes hold within 1/64 of
    an even share where there are enough videos, and a node added or lost moves about its share.
    An int64 NumPy array."""
    if nodes < 1:
        raise ValueError("placement over %d nodes: want at least 1" % nodes)
    w = np.asarray(weights, dtype=np.int64)
    if len(w) != len(names):
        raise ValueError("placement: %d names for %d weights" % (len(names), len(w)))
    node = np.full(len(w), -1, dtype=np.int64)
    vids = np.nonzero(w > 0)[0]
    if len(vids) == 0:
        return node
    head = _PLACEMENT + b"\0" + str(int(seed)).encode() + b"\0"
    keys = np.array([int.from_bytes(hashlib.sha256(head + names[v]).digest()[:8], "big") for v in vids.tolist()],
                    dtype=np.uint64)
    order = np.argsort(keys, kind="stable")  # positions in vids, in order of key
    score = _mix(keys[:, None] ^ _mix(np.arange(1, nodes + 1, dtype=np.uint64))[None, :])
    pref = np.argsort(~score, axis=1, kind="stable")  # highest score first, ties: the lower node
    limit = -(-int(w[vids].sum()) * 65 // (64 * nodes))
    load = np.zeros(nodes, dtype=np.int64)
    got = np.full(len(vids), -1, dtype=np.int64)
    wv = w[vids]
    for r in range(nodes):
        left = order[got[order] < 0]  # not placed yet, in order of key
        if len(left) == 0:
            break
        prop = pref[left, r]
        by = np.argsort(prop, kind="stable")  # grouped by node, in order of key within each
        left, prop = left[by], prop[by]
        cs = np.cumsum(wv[left])
        starts = np.searchsorted(prop, np.arange(nodes))
        before = np.concatenate([[0], cs])[starts]  # the weight before each node's group
        cs = cs - before[prop] + load[prop]
        take = cs <= limit  # a prefix of each node's proposers
        got[left[take]] = prop[take]
        load += np.bincount(prop[take], weights=wv[left[take]], minlength=nodes).astype(np.int64)
    for i in order[got[order] < 0].tolist():
        n = int(np.argmin(load))
        got[i] = n
        load[n] += wv[i]
    node[vids] = got
    return node


def _node_env(world_size, nodes):
    """The number of nodes: nodes if given, else torchrun's (WORLD_SIZE / LOCAL_WORLD_SIZE) or
    Slurm's (SLURM_NNODES); and the node that the environment says this process is on (torchrun's
    GROUP_RANK, Slurm's SLURM_NODEID), or None."""
    env = os.environ
    said = None
    if "GROUP_RANK" in env:
        said = int(env["GROUP_RANK"])
    elif "SLURM_NODEID" in env:
        said = int(env["SLURM_NODEID"])
    if nodes is None:
        if "LOCAL_WORLD_SIZE" in env:
            local = int(env["LOCAL_WORLD_SIZE"])
            if local < 1 or world_size % local:
                raise ValueError("placement='node': LOCAL_WORLD_SIZE=%d does not divide the world of %d" % (local, world_size))
            nodes = world_size // local
        elif "SLURM_NNODES" in env:
            nodes = int(env["SLURM_NNODES"])
        else:
            raise ValueError("placement='node' needs the number of nodes: give nodes=, or run under torchrun "
                             "(LOCAL_WORLD_SIZE) or Slurm (SLURM_NNODES)")
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

    placement="node", for a job over several nodes each with its own mount: each video is read
    on one node for the whole run (placement(), balanced by what an epoch reads: a video's
    samples with clips="all", the same for every video otherwise), so that each node's training
    copy holds only its share. Each epoch the node's ranks split its samples anew; each rank
    gets the same number (padded with the node's first ones again, or cut short with drop_last,
    as DistributedSampler does). nodes is taken from torchrun (WORLD_SIZE / LOCAL_WORLD_SIZE) or
    Slurm (SLURM_NNODES) unless given; ranks are numbered node by node (rank // (world_size /
    nodes) is the node), as torchrun and Slurm number them. Each global batch then holds a part
    from each node's share: docs/usage.md says when that matters."""

    def __init__(self, mount, rank=None, world_size=None, seed=0, shuffle=True, drop_last=False,
                 clips="all", clips_per_video=1, epochs=None, name=None, skip_failed=False,
                 placement=None, nodes=None):
        if clips not in ("all", "random", "uniform"):
            raise ValueError("clips %r: want 'all', 'random' or 'uniform'" % (clips,))
        if placement not in (None, "node"):
            raise ValueError("placement %r: want None or 'node'" % (placement,))
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
        if placement == "node":
            self._place(nodes)
        self.epoch = 0
        self._orders = {}  # epoch -> this rank's order, an array, for this epoch and the next
        self._written = None  # the epoch whose plan vidfs has
        self._write()  # vidfs starts decoding while the trainer sets up

    def _place(self, nodes):
        """placement="node": the node count, this rank's node, and each video's node."""
        nodes, said = _node_env(self.world_size, nodes)
        if nodes < 1 or self.world_size % nodes:
            raise ValueError("placement='node': %d nodes do not divide the world of %d ranks" % (nodes, self.world_size))
        local = self.world_size // nodes
        self.nodes, self.node = nodes, self.rank // local
        if said is not None and said != self.node:
            raise ValueError("placement='node': rank %d of %d, %d a node, is on node %d, but the environment says node %d "
                             "(GROUP_RANK or SLURM_NODEID): vidfs wants ranks numbered node by node"
                             % (self.rank, self.world_size, local, self.node, said))
        table = self.mount._video_table()
        names = self.mount.video_names()
        if len(names) != len(table):
            raise OSError(errno.EIO, "%s: .vidfs/videos.txt has %d videos, .vidfs/videos.npy %d" % (self.mount.path, len(names), len(table)))
        weights = table[:, 1] if self.clips == "all" else (table[:, 1] > 0).astype(np.int64)
        self._video_node = placement(names, weights, self.seed, nodes)
        self._agree(hashlib.sha256(b"\n".join(names)).hexdigest())

    def _agree(self, digest):
        """Under torch.distributed, that every rank places the same videos on the same nodes:
        a ValueError naming the ranks that do not (a collective: every rank builds its sampler)."""
        try:
            import torch.distributed as dist
        except ImportError:
            return
        if not (dist.is_available() and dist.is_initialized()):
            return
        mine = (self.nodes, self.world_size // self.nodes, self.seed, self.clips, digest)
        every = [None] * self.world_size
        dist.all_gather_object(every, mine)
        odd = [r for r, theirs in enumerate(every) if theirs != every[0]]
        if odd:
            raise ValueError("placement='node': ranks %s place videos otherwise than rank 0 (nodes, ranks a node, seed, "
                             "clips, videos): %r against %r" % (odd, every[odd[0]], every[0]))

    def _every(self):
        """Whether an epoch's samples are every sample in order: 0, 1, ... len(mount) - 1."""
        return self.clips == "all" and not self.skip_failed and self._video_node is None

    def _samples(self, epoch, node=None):
        """epoch_samples, as an int64 NumPy array; with node, the video's node of each too."""
        if self.clips == "all":
            samples = np.arange(len(self.mount), dtype=np.int64)
            if node:
                table = self.mount._video_table()
                where = np.repeat(self._video_node, table[:, 1])
        else:
            first, count = self.mount.video_ranges()
            k = self.clips_per_video
            if self.clips == "random":
                pick = _draw(np.random.default_rng([self.seed, epoch]), count, k)
            else:
                j, c = np.arange(k), count[:, None]
                pick = np.minimum(c - 1, (j * c) // k + c // (2 * k))
            samples = (first[:, None] + pick).ravel()
            if node:
                table = self.mount._video_table()
                where = np.repeat(self._video_node[table[:, 1] > 0], k)
        if self.skip_failed:
            keep = ~np.isin(samples, np.array([int(row["sample"]) for row in self.mount.failed()], dtype=np.int64))
            samples = samples[keep]
            if node:
                where = where[keep]
        return (samples, where) if node else samples

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
        """placement="node": this rank's share of its node's samples for an epoch, shuffled
        with the seed, the epoch and the node; every rank of every node gets as many."""
        samples, where = self._samples(epoch, node=True)
        local = self.world_size // self.nodes
        per_node = np.bincount(where, minlength=self.nodes)
        if self.drop_last:
            per = int(per_node.min()) // local
        else:
            per = -(-int(per_node.max()) // local)
        mine = samples[where == self.node]
        if len(mine) == 0 or per == 0:
            return mine[:0]
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
        """Write this epoch's plan, once: writing it again would restart vidfs's count."""
        if self._written != self.epoch:
            self.mount._write_plan_parts(self._plan(), name=self.name)
            self._written = self.epoch

    def __iter__(self):
        self._write()
        return iter(self._order(self.epoch).tolist())

    def __len__(self):
        return len(self._order(self.epoch))
