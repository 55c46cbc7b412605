"""Checks an --fps 15 mount (argv[1], 4 frames 2 apart) from Python: Mount.index() gives each
sample's start_time and end_time, and PlanSampler draws random and uniform clips of each video
as on any mount. Prints "ok" or fails with an assertion."""
import sys

from vidfs import Mount, PlanSampler

mnt = Mount(sys.argv[1])
assert mnt.layout["fps"] == 15, mnt.layout
rows = mnt.index()
for r in rows:
    start, end = float(r["start_time"]), float(r["end_time"])
    assert abs(start - int(r["start"]) / 15) < 1e-6 and abs(end - start - 8 / 15) < 1e-6, r

videos = mnt.videos()
for clips in ("random", "uniform"):
    ps = PlanSampler(mnt, clips=clips, clips_per_video=2, seed=1, name="fps-" + clips)
    for epoch in (0, 1):
        ps.set_epoch(epoch)
        drawn = ps.epoch_samples()
        assert len(drawn) == 2 * len(videos), (clips, len(drawn))
        for v in videos:
            assert len([s for s in drawn if s in v]) == 2, (clips, v)
        assert sorted(ps) == sorted(drawn), clips
        with open(mnt.plan_path(ps.name)) as f:
            assert [int(x) for x in f.read().split()][:len(drawn)] == ps.order(), clips
    mnt.remove_plan(ps.name)
print("ok")
