#!/usr/bin/python3
"""Memory-mapped reads against pread of the same samples, all in vidfs's cache.

Usage: bench/mapped.py MNT [--samples N] [--rounds R]

Reads N random samples of MNT/clips.npy once whole with os.pread (which also fills the cache),
then, R times, taking turns: the same samples in a new random order through pread, and through
an unmodified np.load(mmap_mode="r") loop (np.array(a[i])), reopened each round so that no page
of it is in the kernel's page cache. Prints a JSON line: clips/s of each, per round.
"""
import argparse, json, os, random, time

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mnt")
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    path = os.path.join(a.mnt, "clips.npy")
    arr = np.load(path, mmap_mode="r")
    n, sb = arr.shape[0], arr[0].nbytes
    hdr = arr.offset
    rnd = random.Random(5)
    picks = rnd.sample(range(n), min(a.samples, n))
    buf = bytearray(sb)
    fd = os.open(path, os.O_RDONLY)
    for i in picks:  # into the cache
        os.preadv(fd, [buf], hdr + i * sb)
    os.close(fd)
    del arr
    out = {"samples": len(picks), "sample_bytes": sb, "pread": [], "mmap": []}
    for _ in range(a.rounds):
        rnd.shuffle(picks)
        fd = os.open(path, os.O_RDONLY)
        t0 = time.perf_counter()
        for i in picks:
            got = 0
            while got < sb:
                got += os.preadv(fd, [memoryview(buf)[got:]], hdr + i * sb + got)
        out["pread"].append(len(picks) / (time.perf_counter() - t0))
        os.close(fd)
        rnd.shuffle(picks)
        m = np.load(path, mmap_mode="r")
        t0 = time.perf_counter()
        for i in picks:
            np.array(m[i])
        out["mmap"].append(len(picks) / (time.perf_counter() - t0))
        del m
    print(json.dumps(out))


if __name__ == "__main__":
    main()
