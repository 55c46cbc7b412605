"""The loaders make bench compares, as PyTorch map-style datasets of (clip, label) with clip a
(T, H, W, 3) uint8 NumPy array. Each reads the same clips: those listed in a vidfs mount's
index.csv (video, start frame, stride), T frames, cropped to H x W (short side scaled, centre cut).

  pyav    decode with PyAV, the usual way: open, seek by time, decode, to_ndarray
  opencv  decode with OpenCV's VideoCapture: set the frame position, grab, retrieve, resize
  vidfs   read the decoded clip from the mount's clips.npy (python/vidfs.py)
  npy     the ceiling: the same clips decoded beforehand to .npy files on local disk
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import vidfs  # noqa: E402


def crop(img, h, w):
    """Centre-cut an image already scaled so that it covers h x w."""
    y, x = (img.shape[0] - h) // 2, (img.shape[1] - w) // 2
    return img[y:y + h, x:x + w]


def cover(width, height, h, w):
    """The size that scales (width, height) to cover h x w, keeping the aspect ratio."""
    s = max(w / width, h / height)
    return max(w, round(width * s)), max(h, round(height * s))


class Clips:
    """What every decoding dataset shares: the clip list and the spec."""

    def __init__(self, clips, frames, height, width):
        self.clips = clips  # [(path, start, stride, label)]
        self.frames, self.height, self.width = frames, height, width

    def __len__(self):
        return len(self.clips)


class PyAVClips(Clips):
    def __getitem__(self, i):
        import av
        path, start, stride, label = self.clips[i]
        wanted = set(range(start, start + stride * self.frames, stride))
        last = max(wanted)
        out = []
        with av.open(path) as container:
            stream = container.streams.video[0]
            fps = float(stream.average_rate)
            t0 = stream.start_time or 0
            tb = float(stream.time_base)
            container.seek(t0 + int(start / fps / tb), stream=stream, backward=True, any_frame=False)
            size = None
            for frame in container.decode(stream):
                idx = int(round((frame.pts - t0) * tb * fps))
                if idx in wanted:
                    if size is None:
                        size = cover(frame.width, frame.height, self.height, self.width)
                    img = frame.to_ndarray(width=size[0], height=size[1], format="rgb24")
                    out.append(crop(img, self.height, self.width))
                if idx >= last:
                    break
        while len(out) < self.frames:  # the end of the video came first
            out.append(out[-1])
        return np.stack(out[:self.frames]), label


class OpenCVClips(Clips):
    def __getitem__(self, i):
        import cv2
        path, start, stride, label = self.clips[i]
        cap = cv2.VideoCapture(path)
        cap.set(cv2.CAP_PROP_POS_FRAMES, start)
        out = []
        for k in range(stride * (self.frames - 1) + 1):
            if not cap.grab():
                break
            if k % stride == 0:
                ok, img = cap.retrieve()
                if not ok:
                    break
                size = cover(img.shape[1], img.shape[0], self.height, self.width)
                img = cv2.resize(img, size, interpolation=cv2.INTER_LINEAR)
                out.append(cv2.cvtColor(crop(img, self.height, self.width), cv2.COLOR_BGR2RGB))
        cap.release()
        while len(out) < self.frames:
            out.append(out[-1])
        return np.stack(out), label


class NpyClips:
    """The ceiling: sample i is DIR/i.npy."""

    def __init__(self, directory, labels):
        self.dir, self.labels = directory, labels

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return np.load(os.path.join(self.dir, "%d.npy" % i)), self.labels[i]


def make(contender, mnt, ceiling_dir, source):
    """The dataset of a contender. The clip list comes from the mount's index.csv."""
    mount = vidfs.Mount(mnt)
    if contender.startswith("vidfs"):
        return vidfs.Dataset(mount)
    if contender == "npy":
        return NpyClips(ceiling_dir, mount.labels())
    import csv
    with open(os.path.join(mnt, "index.csv")) as f:
        rows = list(csv.DictReader(f))
    clips = [(os.path.join(source, r["video"]), int(r["start"]), int(r["stride"]), int(r["label"])) for r in rows]
    lay = mount.layout
    cls = {"pyav": PyAVClips, "opencv": OpenCVClips}[contender]
    return cls(clips, lay["frames"], lay["height"], lay["width"])
