#!/usr/bin/python3
"""The demo's reader: what a training loop does with a vidfs mount, with figures."""
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from vidfs import Mount, PlanSampler  # noqa: E402

mnt = Mount(sys.argv[1])
a = mnt.array()
print("clips.npy through np.load(mmap_mode='r'):", a.shape, a.dtype)
print("classes:", ", ".join(mnt.classes()), "| samples per class:",
      dict(zip(*np.unique([mnt.classes()[l] if l >= 0 else "-" for l in mnt.labels()], return_counts=True))))

sampler = PlanSampler(mnt, seed=1, epochs=2)
for epoch in range(2):
    sampler.set_epoch(epoch)
    before = mnt.stats()
    start = time.perf_counter()
    shapes, failed = set(), []
    for i in sampler:  # writes the shuffled plan to .vidfs/order, then yields it
        try:
            clip = mnt.read(i)
            shapes.add(clip.shape)
            time.sleep(0.002)  # a (very small) training step
        except OSError as e:
            failed.append((i, e.strerror))
    secs = time.perf_counter() - start
    st = mnt.stats()
    hits = st["cache"]["hits"] - before["cache"]["hits"]
    misses = st["cache"]["misses"] - before["cache"]["misses"]
    print("epoch %d: read %d samples of shape %s in %.2f s: %.0f clips/s; hit rate %.0f %%, waited %.2f s for decoding; %d failed (EIO)"
          % (epoch, len(mnt) - len(failed), sorted(shapes), secs, (len(mnt) - len(failed)) / secs,
             100 * hits / max(hits + misses, 1), st["reads"]["wait_s"] - before["reads"]["wait_s"], len(failed)))

print("decoded %d clips (%.1f frames decoded per frame served), %d reads, latency p50 %.2f ms, p99 %.2f ms"
      % (st["decode"]["clips"], st["decode"]["amplification"], st["reads"]["requests"],
         st["reads"]["latency_ms"]["p50"], st["reads"]["latency_ms"]["p99"]))
for e in st["errors"]:
    where = "whole video" if e["sample"] < 0 else "sample %d" % e["sample"]
    frame = "frame %d: " % e["frame"] if e.get("frame") is not None else ""
    print("  error: %s (%s): %s%s" % (e["file"], where, frame, e["reason"]))
