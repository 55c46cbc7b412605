#!/usr/bin/python3
"""Decodes clips the way a PyTorch Dataset usually does with PyAV, one thread, and times it.

For each clip: open the file, seek to the keyframe before the first frame, decode forward and
keep the clip's frames (matched by timestamp), converted with to_ndarray(width, height).

Usage: pyav_clips.py SPEC, where SPEC is a JSON file {"path", "width", "height",
"clips": [[pts, ...], ...]}. For each line "FIRST END" read from stdin it decodes clips
FIRST..END-1 and prints {"clips", "seconds", "cpu_seconds"} (cpu_seconds: this process's CPU
time), until stdin ends; so a benchmark can take turns with it. Used by decode's
BenchmarkVersusPyAV; by hand: echo 0 100 | bench/pyav_clips.py SPEC
"""
import json
import sys
import time

import av


def decode_clip(path, pts, width, height):
    with av.open(path) as container:
        stream = container.streams.video[0]
        stream.codec_context.thread_count = 1
        container.seek(pts[0], stream=stream, backward=True, any_frame=False)
        wanted, frames = set(pts), []
        for frame in container.decode(stream):
            if frame.pts in wanted:
                frames.append(frame.to_ndarray(width=width, height=height, format="rgb24"))
            if frame.pts is not None and frame.pts >= pts[-1]:
                break
        if len(frames) != len(pts):
            raise SystemExit(f"{path}: got {len(frames)} of {len(pts)} frames for clip at pts {pts[0]}")
        return frames


def decode_clips(spec, clips):
    start, cpu = time.perf_counter(), time.process_time()
    for pts in clips:
        decode_clip(spec["path"], pts, spec["width"], spec["height"])
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
    return {"clips": len(clips), "seconds": seconds, "cpu_seconds": cpu_seconds}


def main():
    spec = json.load(open(sys.argv[1]))
    for line in sys.stdin:
        first, end = map(int, line.split())
        print(json.dumps(decode_clips(spec, spec["clips"][first:end])), flush=True)


if __name__ == "__main__":
    main()
