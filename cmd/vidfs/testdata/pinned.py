"""vidfs.placement() gives the vectors placement/testdata/pinned.json pins (which the Go rule,
placement.Assign, is tested against too). Prints "ok" or fails with an assertion."""
import json
import os

from vidfs import placement

here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "..", "..", "..", "placement", "testdata", "pinned.json")) as f:
    cases = json.load(f)
for i, c in enumerate(cases):
    got = placement([n.encode() for n in c["Names"]], c["Weights"], c["Seed"], c["Nodes"]).tolist()
    assert got == c["Want"], "case %d: %s, want %s" % (i, got, c["Want"])
    # names as str, nodes given by count where they are numbers: the same.
    assert placement(c["Names"], c["Weights"], c["Seed"], c["Nodes"]).tolist() == got, "case %d as str" % i
# Nodes by count (any integer type), or as numbers, are the nodes named by their numbers.
c = cases[0]
names = [n.encode() for n in c["Names"]]
import numpy as np  # noqa: E402
want = placement(names, c["Weights"], c["Seed"], ["0", "1", "2"]).tolist()
for nodes in (3, np.int64(3), [0, 1, 2], [b"0", b"1", b"2"]):
    assert placement(names, c["Weights"], c["Seed"], nodes).tolist() == want, nodes
try:
    placement(names, c["Weights"], c["Seed"], [1.5, 2])
except TypeError:
    pass
else:
    raise AssertionError("a float node name: no error")
print("ok")
