"""make test-dist's reader (scripts/test-dist.sh): every sample of a vidfs mount through
np.load(mmap_mode="r"), one SHA-256 a sample, then the mount's list of failed samples, written to
OUT, so that mounts on different systems can be compared byte for byte.

Usage: python3 scripts/dist-read.py MNT OUT     (Python 3.8+, any NumPy; the mount serves zeros
                                                 for failed samples: --on-error zeros)
"""
import hashlib
import os
import sys

import numpy as np

mnt, out = sys.argv[1], sys.argv[2]
a = np.load(os.path.join(mnt, "clips.npy"), mmap_mode="r")
lines = ["clips.npy %s %s" % (a.shape, a.dtype)]
zeros = 0
for i in range(len(a)):
    sample = np.ascontiguousarray(a[i])  # page faults on the memory map: reads through FUSE
    zeros += not sample.any()
    lines.append("sample %d %s" % (i, hashlib.sha256(sample.tobytes()).hexdigest()))
with open(os.path.join(mnt, ".vidfs", "failed")) as f:
    failed = f.read().splitlines()
lines += ["failed " + line for line in failed[:1] + sorted(failed[1:])]
with open(out, "w") as f:
    f.write("\n".join(lines) + "\n")
print("read %d samples %s through np.load(mmap_mode='r'): %d decoded, %d failed (zeros)"
      % (len(a), a.shape[1:], len(a) - zeros, len(failed) - 1))
