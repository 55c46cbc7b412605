#!/usr/bin/python3
"""Decodes clips at a target frame rate the way a PyTorch Dataset usually does with PyAV, one
thread, and times it: frames picked by their timestamps.

For each clip of T frames at instants (start + j*stride)/fps seconds after the video's first
frame: open the file, seek to the keyframe before the first instant, decode forward, and for
each instant keep the last frame whose presentation time is at or before it (converted with
to_ndarray(width, height), once even when it is shown at several instants).

Usage: pyav_fps_clips.py SPEC, where SPEC is a JSON file {"path", "width", "height",
"fps": [num, den], "clips": [[start, frames, stride], ...]}. For each line "FIRST END" read from
stdin it decodes clips FIRST..END-1 and prints {"clips", "seconds", "cpu_seconds", "pts"}
(cpu_seconds: this process's CPU time; pts: the timestamps of the frames each clip holds, for
checking), until stdin ends; so a benchmark can take turns with it. Used by decode's
BenchmarkFPSVersusPyAV; by hand: echo 0 100 | bench/pyav_fps_clips.py SPEC
"""
import json
import sys
import time
from fractions import Fraction

import av


def first_pts(path):
    """The first displayed frame's timestamp: times are measured from it."""
    with av.open(path) as container:
        for frame in container.decode(video=0):
            return frame.pts


def decode_clip(path, base, fps, clip, width, height):
    start, frames, stride = clip
    instants = [Fraction(start + j * stride) / fps for j in range(frames)]
    out, pts = [], []
    with av.open(path) as container:
        stream = container.streams.video[0]
        stream.codec_context.thread_count = 1
        tb = stream.time_base
        container.seek(base + int(instants[0] / tb), stream=stream, backward=True, any_frame=False)
        shown, array = None, None  # the last frame at or before the next instant, converted once

        def keep():
            nonlocal array
            if array is None:
                array = shown.to_ndarray(width=width, height=height, format="rgb24")
            out.append(array)
            pts.append(shown.pts)

        for frame in container.decode(stream):
            t = (frame.pts - base) * tb
            while len(out) < frames and t > instants[len(out)] and shown is not None:
                keep()
            if len(out) == frames:
                break
            if t <= instants[len(out)] or shown is None:
                shown, array = frame, None
        while len(out) < frames and shown is not None:  # the end of the video
            keep()
    if len(out) != frames:
        raise SystemExit(f"{path}: got {len(out)} of {frames} frames for clip {clip}")
    return pts


def decode_clips(spec, base, clips):
    fps = Fraction(*spec["fps"])
    start, cpu = time.perf_counter(), time.process_time()
    pts = [decode_clip(spec["path"], base, fps, c, spec["width"], spec["height"]) for c in clips]
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
    return {"clips": len(clips), "seconds": seconds, "cpu_seconds": cpu_seconds, "pts": pts}


def main():
    spec = json.load(open(sys.argv[1]))
    base = first_pts(spec["path"])
    for line in sys.stdin:
        first, end = map(int, line.split())
        print(json.dumps(decode_clips(spec, base, spec["clips"][first:end])), flush=True)


if __name__ == "__main__":
    main()
