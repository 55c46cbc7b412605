#!/usr/bin/python3
"""Decodes clips the way a PyTorch Dataset usually does with PyAV, one thread, and times it.

For each clip: open the file, seek to the keyframe before the first frame, decode forward and
keep the clip's frames (matched by timestamp), converted with to_ndarray(width, height). Reads a
JSON spec {"path", "width", "height", "clips": [[pts, ...], ...]} and prints
{"clips", "seconds", "cpu_seconds", "clips_per_s"} as JSON (cpu_seconds: this process's CPU time). Used by decode's BenchmarkPyAV.
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
    serve = sys.argv[1] == "--serve"
    spec = json.load(open(sys.argv[2] if serve else sys.argv[1]))
    if not serve:
        r = decode_clips(spec, spec["clips"])
        r["clips_per_s"] = r["clips"] / r["seconds"]
        print(json.dumps(r))
        return
    for line in sys.stdin:
        first, end = map(int, line.split())
        print(json.dumps(decode_clips(spec, spec["clips"][first:end])), flush=True)


if __name__ == "__main__":
    main()
