#!/usr/bin/python3
"""vidfs on a machine with an NVIDIA GPU (issue 22): NVDEC's correctness and speed, a mount that
decodes on the GPU, and how the CPU path scales with --workers on all the machine's cores.

Such a machine here has no network and no Go toolchain or FFmpeg, so the work is in two halves:

  bench/gpu.py pack [DIR]   here: put in DIR (default .device/, which git ignores) what the
                            GPU machine needs: the release binary (make dist), the decode
                            package's compiled tests, the shared libraries they need, fusermount3,
                            Megamind.avi and the transcodes of it the NVDEC tests use
  bench/gpu.py run [DIR]    there, from the repository's root: the steps below, each with its
                            log in $OUT (or --out), and a summary table at the end

Steps (--steps, default all):
  env      the GPU, driver, kernel, glibc, cores; what the binaries need (ldd); vidfs version
  tests    the decode package's NVDEC tests (frame-exact clips against the CPU, real footage at
           720p/1080p, refused streams falling back, more videos than GPU decoders)
  bench    BenchmarkNVDEC: T=16, stride 2, 224x224 from 720p/1080p H.264 and HEVC, through NVDEC
           with 1-16 decoders at once (GPU memory at each), all CPU cores, and NVDEC's ceiling
  mount    vidfs mount --hwaccel cuda over 200 videos (hard links to the transcodes, --kinds), read
           by vidfs bench with a plan: hit rate, clips/s, clips by decoder, nvidia-smi dmon
  scale    the CPU path: the same mount with --hwaccel none and --workers 1, 2, 4, 8, 16 (and
           the machine's core count): clips/s and vidfs's CPU seconds per clip
  gpus     every GPU of the machine (issue 34): the mount with --gpus all (--workers 8 a GPU, at
           most 2x the cores), beside --gpus 0 (--workers 8) and the CPU (--hwaccel none
           --workers 16): clips/s, CPU per clip, and each GPU's decoders open, their estimated
           memory and its clips, from .vidfs/stats (decode.gpus)

The steps that need a GPU (tests, bench, mount, gpus) stop at once, saying so, where nvidia-smi
finds none.
"""
import argparse
import hashlib
import json
import lzma
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MEGAMIND = "/usr/share/doc/opencv-doc/examples/data/Megamind.avi"

# The transcodes of Megamind the NVDEC tests and benchmark ask internal/testvideo.Transcode for:
# the same argument strings as decode/nvdec_test.go, so that they land under the same names in the
# cache Transcode reads. A mismatch shows there as "ffmpeg: not found" (the GPU machine has none).
TRANSCODES = {
    "h264-720p": "-vf scale=1280:720 -g 48",
    "h264-1080p": "-vf scale=1920:1080 -g 48",
    "hevc-720p": "-vf scale=1280:720 -g 48 -c:v libx265 -x265-params log-level=error",
    "hevc-1080p": "-vf scale=1920:1080 -g 48 -c:v libx265 -x265-params log-level=error",
    "h264-high10": "-g 48 -frames:v 96 -pix_fmt yuv420p10le -profile:v high10",
    "h264-720p-ss3": "-ss 3 -frames:v 96 -vf scale=1280:720 -g 48",
    "h264-720p-ss6": "-ss 6 -frames:v 96 -vf scale=1280:720 -g 48",
}


def transcode_name(args):
    """The file name internal/testvideo.Transcode gives the transcode of Megamind with args."""
    h = hashlib.sha256((MEGAMIND + "\0" + args).encode()).hexdigest()[:12]
    return "Megamind-%s.mp4" % h


def log(*a):
    print("gpu.py:", *a, file=sys.stderr, flush=True)


def sh(cmd, **kw):
    log("$", cmd if isinstance(cmd, str) else " ".join(cmd))
    return subprocess.run(cmd, shell=isinstance(cmd, str), check=True, **kw)


def xz(src, dst):
    with open(src, "rb") as f, lzma.open(dst, "wb", preset=6) as g:
        shutil.copyfileobj(f, g, 1 << 20)


def unxz(src, dst):
    with lzma.open(src, "rb") as f, open(dst, "wb") as g:
        shutil.copyfileobj(f, g, 1 << 20)
    os.chmod(dst, 0o755)


def pack(d):
    os.makedirs(d, exist_ok=True)
    os.chdir(ROOT)
    # The release binary: static FFmpeg and dav1d, glibc 2.31+.
    sh(["make", "dist"])
    tarball = [f for f in os.listdir("dist") if f.endswith("-linux-x86_64.tar.gz")][0]
    tmp = os.path.join(d, "tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    sh(["tar", "-C", tmp, "--strip-components=1", "-xzf", os.path.join("dist", tarball)])
    xz(os.path.join(tmp, "vidfs"), os.path.join(d, "vidfs.xz"))
    # The decode package's tests, built here against the cached FFmpeg (static) and linked to
    # the system's libdav1d, which travels beside them.
    test = os.path.join(tmp, "decode.test")
    sh(["scripts/with-ffmpeg", "go", "test", "-c", "-o", test, "./decode"])
    xz(test, os.path.join(d, "decode.test.xz"))
    libs = os.path.join(d, "lib")
    os.makedirs(libs, exist_ok=True)
    for line in subprocess.run(["ldd", test], capture_output=True, text=True, check=True).stdout.splitlines():
        m = re.match(r"\s*(libdav1d\S*) => (\S+)", line)
        if m:
            shutil.copy(os.path.realpath(m.group(2)), os.path.join(libs, m.group(1)))
    shutil.copy(shutil.which("fusermount3"), os.path.join(d, "fusermount3"))
    shutil.copy(MEGAMIND, os.path.join(d, "Megamind.avi"))
    cache = os.path.join(d, "cache", "vidfs", "testvideos")
    os.makedirs(cache, exist_ok=True)
    for name, args in TRANSCODES.items():
        out = os.path.join(cache, transcode_name(args))
        if not os.path.exists(out):
            log("transcoding", name)
            sh(["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", "-i", MEGAMIND, "-an", "-c:v", "libx264",
                "-preset", "veryfast", "-pix_fmt", "yuv420p"] + args.split() + [out + ".tmp.mp4"])
            os.rename(out + ".tmp.mp4", out)
    shutil.rmtree(tmp)
    sh(["du", "-sh", d])


class Run:
    def __init__(self, d, out):
        self.d, self.out = os.path.abspath(d), out
        self.bin = "/tmp/vidfs-gpu-bin"  # unpacked outside DIR, which travels
        self.summary = []
        self.kinds = ["h264-720p", "h264-1080p", "hevc-720p", "hevc-1080p"]
        self.profile = False
        os.makedirs(out, exist_ok=True)

    def note(self, line):
        self.summary.append(line)
        log(line)

    def setup(self):
        os.makedirs(self.bin, exist_ok=True)
        for name in ("vidfs", "decode.test"):
            if not os.path.exists(os.path.join(self.bin, name)):
                unxz(os.path.join(self.d, name + ".xz"), os.path.join(self.bin, name))
        if not shutil.which("fusermount3"):
            shutil.copy(os.path.join(self.d, "fusermount3"), os.path.join(self.bin, "fusermount3"))
        os.environ["PATH"] = self.bin + ":" + os.environ["PATH"]
        os.environ["LD_LIBRARY_PATH"] = os.path.join(self.d, "lib")
        os.environ["XDG_CACHE_HOME"] = os.path.join(self.d, "cache")
        if not os.path.exists(MEGAMIND):
            os.makedirs(os.path.dirname(MEGAMIND), exist_ok=True)
            shutil.copy(os.path.join(self.d, "Megamind.avi"), MEGAMIND)
        if not os.path.exists("/dev/fuse"):
            subprocess.run(["mknod", "-m", "666", "/dev/fuse", "c", "10", "229"])
        # The test binary finds testdata/ by the path it was compiled at (this repository's
        # root here); there, that path leads to the copy of the repository.
        src = self.compiled_root()
        if src and not os.path.exists(os.path.join(src, "testdata")):
            os.makedirs(os.path.dirname(src), exist_ok=True)
            os.symlink(ROOT, src)

    def compiled_root(self):
        """The repository root the tests were compiled at (pack writes it)."""
        p = os.path.join(self.d, "root")
        return open(p).read().strip() if os.path.exists(p) else None

    def run(self, name, cmd, timeout, **kw):
        """Runs cmd with its output in OUT/name.log; returns (exit status, output)."""
        log("step", name, ":", cmd if isinstance(cmd, str) else " ".join(cmd))
        t = time.time()
        try:
            p = subprocess.run(cmd, shell=isinstance(cmd, str), capture_output=True, text=True, timeout=timeout, **kw)
            rc, text = p.returncode, p.stdout + p.stderr
        except subprocess.TimeoutExpired as e:
            rc, text = 124, (e.stdout or b"").decode(errors="replace") + (e.stderr or b"").decode(errors="replace")
        with open(os.path.join(self.out, name + ".log"), "a") as f:
            f.write("$ %s\n%s\n[exit %d in %.1f s]\n" % (cmd, text, rc, time.time() - t))
        return rc, text

    def env(self):
        for c in ["nvidia-smi -L", "nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv",
                  "uname -r", "nproc", "ldd --version | head -1", "grep -m1 'model name' /proc/cpuinfo", "free -g | head -2",
                  "ldd bin/decode.test", "ldd bin/vidfs", "ls -la /dev/fuse", "which fusermount3", "vidfs version | head -8"]:
            rc, text = self.run("env", c.replace("bin/", self.bin + "/"), 60)
            print("$ " + c + "\n" + text.strip())

    def tests(self, timeout):
        rc, text = self.run("tests", [os.path.join(self.bin, "decode.test"), "-test.v", "-test.count=1",
                                      "-test.run", "NVDEC|HWAccel|ChooseDecoder"], timeout, cwd=os.path.join(ROOT, "decode"))
        for line in text.splitlines():
            if re.match(r"^(--- |ok|FAIL|PASS|\s+nvdec_test|\s+hw_test)", line):
                print(line)
        self.note("tests: exit %d" % rc)

    def bench(self, timeout, benchtime, only):
        rc, text = self.run("bench", [os.path.join(self.bin, "decode.test"), "-test.run", "^$", "-test.bench", "NVDEC" + only,
                                      "-test.benchtime", benchtime, "-test.count", "1"], timeout, cwd=os.path.join(ROOT, "decode"))
        for line in text.splitlines():
            if line.startswith("Benchmark") or "FAIL" in line or "panic" in line:
                print(line)
        self.note("bench: exit %d" % rc)

    def dataset(self):
        """200 videos: hard links to the transcodes named by --kinds, in one folder each."""
        ds = "/tmp/vidfs-gpu-dataset-" + "-".join(self.kinds)
        if os.path.exists(ds):
            return ds
        cache = os.path.join(self.d, "cache", "vidfs", "testvideos")
        for name in self.kinds:
            os.makedirs(os.path.join(ds, name))
            for k in range(200 // len(self.kinds)):
                os.link(os.path.join(cache, transcode_name(TRANSCODES[name])), os.path.join(ds, name, "v%02d.mp4" % k))
        return ds

    def mount(self, tag, extra, duration, jobs):
        """Mounts the dataset with extra flags, reads it with vidfs bench for duration; returns a
        dict of what it measured."""
        ds, mnt = self.dataset(), "/tmp/vidfs-gpu-mnt"
        os.makedirs(mnt, exist_ok=True)
        pidf, logf = "/tmp/vidfs-gpu.pid", os.path.join(self.out, "mount-%s.log" % tag)
        args = ["vidfs", "mount", ds, mnt, "--frames", "16", "--stride", "2", "--size", "224x224", "--cache-mem", "2GiB",
                "--probe-cache", "/tmp/vidfs-gpu-probe", "--daemon", "--log-file", logf, "--pid-file", pidf] + extra
        if self.profile:
            args += ["--metrics-addr", "127.0.0.1:9191"]
        rc, text = self.run("mount-" + tag, args, 300)
        if rc != 0:
            self.note("%s: mount failed (exit %d): %s" % (tag, rc, text.strip()[-300:]))
            return None
        pid = int(open(pidf).read())
        cpu0, t0 = cputime(pid), time.time()
        dmon = None
        if "--hwaccel" in extra and extra[extra.index("--hwaccel") + 1] != "none" and shutil.which("nvidia-smi"):
            dmon = subprocess.Popen(["nvidia-smi", "dmon", "-s", "um", "-d", "1"], stdout=open(os.path.join(self.out, "dmon-%s.txt" % tag), "w"),
                                    stderr=subprocess.STDOUT)
        prof = None
        if self.profile:
            prof = threading.Thread(target=profile, args=("http://127.0.0.1:9191/debug/pprof", os.path.join(self.out, tag)))
            prof.start()
        rc, text = self.run("bench-" + tag, ["vidfs", "bench", mnt, "--pattern", "plan", "--jobs", str(jobs), "--duration", duration], 600)
        if prof:
            prof.join()
        cpu1, t1 = cputime(pid), time.time()
        if dmon:
            dmon.send_signal(signal.SIGINT)
            dmon.wait()
        stats = {}
        try:
            stats = json.load(open(os.path.join(mnt, ".vidfs", "stats")))
            json.dump(stats, open(os.path.join(self.out, "stats-%s.json" % tag), "w"), indent=1)
        except (OSError, ValueError) as e:
            log("stats:", e)
        self.run("umount-" + tag, ["vidfs", "umount", mnt], 60)
        r = {"tag": tag, "bench_exit": rc}
        m = re.search(r"read: (\d+) clips in ([\d.]+) s: ([\d.]+) clips/s", text)
        if m:
            r["clips"], r["secs"], r["clips_s"] = int(m.group(1)), float(m.group(2)), float(m.group(3))
            r["cpu_per_clip_ms"] = 1000 * (cpu1 - cpu0) / max(r["clips"], 1)
            r["cores_busy"] = (cpu1 - cpu0) / (t1 - t0)
        m = re.search(r"hit rate ([\d.]+ ?%|[\d.]+)", text)
        if m:
            r["hit_rate"] = m.group(1)
        m = re.search(r"errors: (\d+)", text)
        r["errors"] = int(m.group(1)) if m else None
        dec = stats.get("decode", {}) if isinstance(stats, dict) else {}
        r["by_decoder"] = dec.get("by_decoder")
        r["gpu_fallbacks"] = dec.get("gpu_fallbacks")
        r["gpus"] = dec.get("gpus")
        if dmon:
            r["dmon"] = dmon_summary(os.path.join(self.out, "dmon-%s.txt" % tag))
        self.note("%s: %s" % (tag, json.dumps(r)))
        return r


def profile(base, prefix):
    """While a mount is read: 5 goroutine dumps a second apart (where each goroutine waits), then
    an 8 s CPU profile, saved as PREFIX-goroutines.txt and PREFIX-cpu.pprof."""
    import urllib.request
    time.sleep(3)
    try:
        with open(prefix + "-goroutines.txt", "wb") as f:
            for _ in range(5):
                f.write(urllib.request.urlopen(base + "/goroutine?debug=2", timeout=10).read())
                time.sleep(1)
        with open(prefix + "-cpu.pprof", "wb") as f:
            f.write(urllib.request.urlopen(base + "/profile?seconds=6", timeout=30).read())
    except OSError as e:
        log("profile:", e)


def gpu_count():
    """The NVIDIA GPUs nvidia-smi lists (0 where it is missing or fails)."""
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def per_gpu(r):
    """Each GPU's figures of a mount's result: 'GPU n: decoders/max, MiB, clips' joined."""
    return "; ".join("GPU %d: %d/%d dec, %.0f MiB, %d clips" % (g["index"], g["decoders"], g["max_decoders"],
                                                               g["decoder_memory_bytes"] / 2**20, g["clips"])
                     for g in (r.get("gpus") or []))


def cputime(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def dmon_summary(path):
    """Mean and peak of nvidia-smi dmon's sm, dec and fb columns over the samples taken."""
    cols, rows = None, []
    for line in open(path):
        if line.startswith("# gpu") or line.startswith("#gpu"):
            cols = line.lstrip("#").split()
        elif cols and not line.startswith("#") and line.strip():
            rows.append(line.split())
    out = {}
    for c in ("sm", "dec", "fb"):
        if cols and c in cols:
            vals = [float(r[cols.index(c)]) for r in rows if len(r) == len(cols) and r[cols.index(c)] not in ("-",)]
            if vals:
                out[c] = {"mean": round(sum(vals) / len(vals), 1), "max": max(vals)}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["pack", "run"])
    ap.add_argument("dir", nargs="?", default=os.path.join(ROOT, ".device"))
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/vidfs-gpu-out"))
    ap.add_argument("--steps", default="env,tests,bench,mount,scale,gpus")
    ap.add_argument("--tests-timeout", type=int, default=240)
    ap.add_argument("--bench-timeout", type=int, default=300)
    ap.add_argument("--benchtime", default="1x", help="go test -benchtime for BenchmarkNVDEC")
    ap.add_argument("--bench-only", default="", help="what follows NVDEC in go test's -bench pattern, e.g. /h264-1080p/ or Mixed. Go splits the "
                         "pattern at each / into one per level, so a group may not hold a /: "
                         "'(/a|Mixed/b)' matches nothing")
    ap.add_argument("--duration", default="20s", help="vidfs bench --duration of each mount")
    ap.add_argument("--workers", default="1,2,4,8,16", help="--workers values of the CPU scale step")
    ap.add_argument("--kinds", default="", help="the transcodes the mounts' 200 videos link to (default: "
                    "h264-720p,h264-1080p,hevc-720p,hevc-1080p)")
    ap.add_argument("--profile", action="store_true", help="mount with --metrics-addr and save goroutine dumps and a CPU "
                    "profile of each mount while it is read")
    ap.add_argument("--scale-jobs", type=int, default=1,
                    help="vidfs bench --jobs of the scale step: with one reader following the plan, decodes are the "
                         "prefetches of --workers; more readers than the prefetch keeps ahead of add their misses, up to "
                         "2x --workers decodes at once")
    ap.add_argument("--gpu-mounts", default="8:8,16:8", help="WORKERS:GPU_DECODERS of each GPU mount")
    a = ap.parse_args()
    if a.what == "pack":
        pack(a.dir)
        with open(os.path.join(a.dir, "root"), "w") as f:
            f.write(ROOT + "\n")
        return
    steps = a.steps.split(",")
    gpus = gpu_count()
    if gpus == 0 and set(steps) & {"tests", "bench", "mount", "gpus"}:
        sys.exit("gpu.py: no NVIDIA GPU here (nvidia-smi -L lists none): the steps %s need a machine with one"
                 % ",".join(s for s in steps if s in ("tests", "bench", "mount", "gpus")))
    r = Run(a.dir, a.out)
    if a.kinds:
        r.kinds = a.kinds.split(",")
    r.profile = a.profile
    r.setup()
    if "env" in steps:
        r.env()
    if "tests" in steps:
        r.tests(a.tests_timeout)
    if "bench" in steps:
        r.bench(a.bench_timeout, a.benchtime, a.bench_only)
    results = []
    if "mount" in steps:
        for spec in a.gpu_mounts.split(","):
            w, g = spec.split(":")
            results.append(r.mount("gpu-w%s-g%s" % (w, g), ["--hwaccel", "cuda", "--workers", w, "--gpu-decoders", g], a.duration, 16))
    if "scale" in steps:
        ws = [int(x) for x in a.workers.split(",")]
        if os.cpu_count() not in ws:
            ws.append(os.cpu_count())
        for w in ws:
            results.append(r.mount("cpu-w%d" % w, ["--hwaccel", "none", "--workers", str(w)], a.duration, a.scale_jobs))
    if "gpus" in steps:
        w = min(8 * gpus, 2 * (os.cpu_count() or 1))
        results.append(r.mount("gpus-all-w%d" % w, ["--hwaccel", "cuda", "--gpus", "all", "--workers", str(w)], a.duration, 2 * w))
        results.append(r.mount("gpus-0-w8", ["--hwaccel", "cuda", "--gpus", "0", "--workers", "8"], a.duration, 16))
        results.append(r.mount("gpus-cpu-w16", ["--hwaccel", "none", "--workers", "16"], a.duration, 16))
    json.dump(results, open(os.path.join(a.out, "mounts.json"), "w"), indent=1)
    print("\n".join(["", "summary:"] + r.summary))
    print("%-16s %8s %10s %10s %8s %s" % ("mount", "clips/s", "CPU ms/clip", "cores busy", "errors", "by decoder / hit rate"))
    for x in results:
        if x and "clips_s" in x:
            print("%-16s %8.1f %10.1f %10.1f %8s %s %s %s" % (x["tag"], x["clips_s"], x["cpu_per_clip_ms"], x["cores_busy"], x["errors"],
                                                          x.get("by_decoder"), x.get("hit_rate"), x.get("dmon", "")))
            if x.get("gpus"):
                print("%-16s %s" % ("", per_gpu(x)))


if __name__ == "__main__":
    main()
