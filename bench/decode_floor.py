#!/usr/bin/python3
"""Counts the frames an exact decoder must decode for each clip of a spec, and those PyAV decodes.

An exact decoder seeks to the keyframe at or before a clip's first frame and must then decode
every reference frame up to the clip's last frame, plus the clip's own frames; non-reference
frames that the clip does not hold can be skipped. Reference frames are found by decoding the
whole video once with skip_frame=NONREF (only they come out). Reads the JSON spec of
pyav_clips.py and prints {"floor_frames_per_clip", "all_frames_per_clip"} as JSON:
all_frames_per_clip counts every frame from the keyframe to the clip's last frame, which is what
decoding without skipping (PyAV's way) costs, before reordering delay.
"""
import json
import sys

import av


def frames(path, skip=None):
    with av.open(path) as container:
        stream = container.streams.video[0]
        stream.codec_context.thread_count = 1
        if skip:
            stream.codec_context.skip_frame = skip
        return [(f.pts, f.key_frame) for f in container.decode(stream)]


def main():
    spec = json.load(open(sys.argv[1]))
    every = frames(spec["path"])
    pts = sorted(p for p, _ in every)
    index = {p: i for i, p in enumerate(pts)}
    keys = sorted(index[p] for p, key in every if key)
    ref = {index[p] for p, _ in frames(spec["path"], "NONREF")}
    floor = total = 0
    for clip in spec["clips"]:
        idx = [index[p] for p in clip]
        kf = max(k for k in keys if k <= idx[0])
        need = set(idx)
        floor += sum(1 for i in range(kf, idx[-1] + 1) if i in ref or i in need)
        total += idx[-1] + 1 - kf
    n = len(spec["clips"])
    print(json.dumps({"floor_frames_per_clip": floor / n, "all_frames_per_clip": total / n}))


if __name__ == "__main__":
    main()
