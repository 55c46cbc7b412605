"""Counts the work Dataset and PlanSampler do on a mount (argv[1]), so that what grows with the
dataset shows whatever the machine's speed: the Python calls and lines run (each turn of a loop
included) by one Dataset[i] (sys.settrace) must stay under a bound well below the mount's sample
count, and the mount's files opened (an audit hook) must be clips.npy once per process and each
control file at most once, never index.csv. Labels agree with index.csv. Prints "ok" or fails
with an assertion."""
import os
import sys

from vidfs import Dataset, Mount, PlanSampler

mp = os.path.realpath(sys.argv[1])
opened = []


def audit(event, args):
    if event == "open" and isinstance(args[0], str) and os.path.realpath(args[0]).startswith(mp + os.sep):
        opened.append(os.path.relpath(os.path.realpath(args[0]), mp))


sys.addaudithook(audit)

mnt = Mount(mp)
n = len(mnt)
assert n >= 500, "%d samples: too few for work per item that grows with them to show" % n
ds = Dataset(mnt)
calls = 0


def count(frame, event, arg):
    """Counts every Python call and every line run, each turn of a loop included."""
    global calls
    calls += 1
    return count


per_item, labels = {}, {}
for i in (0, 1, n // 2, n - 1, 7, n // 3):
    calls = 0
    sys.settrace(count)
    clip, labels[i] = ds[i]
    sys.settrace(None)
    per_item[i] = calls
    assert clip.shape == mnt.shape and type(labels[i]) is int, (clip.shape, type(labels[i]))
assert max(per_item.values()) < 100, "Dataset[i] over %d samples: calls and lines run per item %s" % (n, per_item)

for clips in ("all", "random", "uniform"):
    ps = PlanSampler(mnt, world_size=2, rank=1, clips=clips, clips_per_video=2, name="items")
    for epoch in range(3):
        ps.set_epoch(epoch)
        assert len(list(iter(ps))) == len(ps)
mnt.remove_plan("items")

counts = {p: opened.count(p) for p in set(opened)}
assert counts.pop("clips.npy", 0) == 1, "clips.npy opened %s times" % counts
assert "index.csv" not in counts, "index.csv read for items or plans: %s" % counts
assert all(c == 1 for p, c in counts.items() if p != os.path.join(".vidfs", "plans", "items")), "files opened more than once: %s" % counts

# The labels and videos as index.csv gives them.
rows = mnt.index()
assert mnt.labels().tolist() == [int(row["label"]) for row in rows]
assert all(label == int(rows[i]["label"]) for i, label in labels.items()), labels
videos = [row["video"] for row in rows]
assert [[videos[i] for i in v] for v in mnt.videos()] == [[p] * len(v) for p, v in zip(dict.fromkeys(videos), mnt.videos())]
print("ok")
