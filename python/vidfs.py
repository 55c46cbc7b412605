"""Reading a vidfs mount from Python: samples as NumPy arrays, a Dataset for PyTorch's DataLoader,
and a sampler that tells vidfs each epoch's order so that it decodes ahead of the reader.

Only NumPy is needed; the classes work with torch.utils.data.DataLoader without importing torch.

    from vidfs import Mount, Dataset, PlanSampler
    mnt = Mount("/mnt/videos")
    loader = torch.utils.data.DataLoader(Dataset(mnt), batch_size=8, num_workers=4,
                                         sampler=PlanSampler(mnt, seed=0))
    for epoch in range(10):
        loader.sampler.set_epoch(epoch)
        for clips, labels in loader:   # clips: (8, T, H, W, 3) uint8
            ...
"""
import csv
import json
import os
import random

import numpy as np


class Mount:
    """A vidfs mount point. read(i) returns sample i as a (T, H, W, 3) uint8 array.

    Samples are read from clips.npy with one pread() each (not through a memory map): every
    read reaches vidfs whole, and a sample that cannot be decoded raises OSError (EIO) instead
    of killing the process with SIGBUS, as a memory-mapped read of it would.
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
        self._labels = None

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

    def labels(self):
        """Each sample's label: the index of its class in classes.txt, or -1."""
        if self._labels is None:
            with open(os.path.join(self.path, "index.csv")) as f:
                self._labels = [int(row["label"]) for row in csv.DictReader(f)]
        return self._labels

    def classes(self):
        with open(os.path.join(self.path, "classes.txt")) as f:
            return [line.rstrip("\n") for line in f if line.strip()]

    def write_plan(self, order, append=False):
        """Tell vidfs the samples about to be read, in order. append queues them behind the plan
        in force (the next epoch). An invalid plan raises OSError (EINVAL) and changes nothing."""
        with open(os.path.join(self.path, ".vidfs", "order"), "a" if append else "w") as f:
            f.write(" ".join(str(int(i)) for i in order))
            f.write("\n")

    def stats(self):
        """What vidfs is doing: hit rate, position in the plan, decode rate, waits, errors."""
        with open(os.path.join(self.path, ".vidfs", "stats")) as f:
            return json.load(f)


class Dataset:
    """A map-style dataset of (clip, label): clip is (T, H, W, 3) uint8, as a NumPy array."""

    def __init__(self, mount, transform=None):
        self.mount = mount if isinstance(mount, Mount) else Mount(mount)
        self.transform = transform

    def __len__(self):
        return len(self.mount)

    def __getitem__(self, i):
        clip = self.mount.read(i)
        if self.transform is not None:
            clip = self.transform(clip)
        return clip, self.mount.labels()[i]


class PlanSampler:
    """Yields a shuffled order of all samples each epoch. Before yielding, it writes that order
    to .vidfs/order followed by the next epoch's (orders depend only on seed and epoch), so that
    vidfs decodes just ahead of the DataLoader's workers, across the end of the epoch too. Give
    epochs (the number the training runs) so that the last epoch plans no next one, whose first
    samples vidfs would otherwise decode in vain."""

    def __init__(self, mount, seed=0, shuffle=True, epochs=None):
        self.mount = mount if isinstance(mount, Mount) else Mount(mount)
        self.seed, self.shuffle, self.epoch, self.epochs = seed, shuffle, 0, epochs
        self._written = None  # the epoch whose plan vidfs has
        self._write()  # vidfs starts decoding while the trainer sets up

    def set_epoch(self, epoch):
        self.epoch = epoch
        self._write()

    def _plan(self):
        """This epoch's order and, unless it is the last, the next one's."""
        last = self.epochs is not None and self.epoch + 1 >= self.epochs
        return self.order() + ([] if last else self.order(self.epoch + 1))

    def _write(self):
        """Write this epoch's plan, once: writing it again would restart vidfs's count."""
        if self._written != self.epoch:
            self.mount.write_plan(self._plan())
            self._written = self.epoch

    def order(self, epoch=None):
        order = list(range(len(self.mount)))
        if self.shuffle:
            random.Random(self.seed * 100003 + (self.epoch if epoch is None else epoch)).shuffle(order)
        return order

    def __iter__(self):
        order = self.order()
        self._write()
        self.epoch += 1
        return iter(order)

    def __len__(self):
        return len(self.mount)
