#!/usr/bin/python3
"""Writes vidfs's wheel, dist/vidfs-VERSION-py3-none-manylinux_2_31_x86_64.whl (scripts/dist.sh).

It holds the Python package (python/vidfs.py) and the release binary as the `vidfs` command, in
the wheel's .data/scripts, as ruff and uv ship theirs: pip puts it in the environment's bin/, so
a venv has both `vidfs mount ...` on its PATH and `from vidfs import Mount`. The licences go in
.dist-info/licenses. Name, summary, requirements and licence come from python/pyproject.toml, the
version from python/vidfs.py's __version__, as for `pip install ./python`.

Only the standard library: no pip, setuptools, wheel or network (the wheel format is a zip with
three small text files, PEP 427). Usage:

    scripts/wheel.py --binary BIN --out DIR [--epoch SECONDS] LICENCE_FILE...
"""
import argparse
import base64
import hashlib
import os
import re
import sys
import time
import tomllib
import zipfile

TAG = "py3-none-manylinux_2_31_x86_64"
HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = os.path.join(HERE, "..", "python")


def metadata(project, version, readme):
    lines = [
        "Metadata-Version: 2.1",
        "Name: " + project["name"],
        "Version: " + version,
        "Summary: " + project["description"],
        "License: " + project["license"]["text"],
        "Classifier: License :: OSI Approved :: Apache Software License",
        "Classifier: Operating System :: POSIX :: Linux",
        "Requires-Python: " + project["requires-python"],
    ]
    lines += ["Requires-Dist: " + d for d in project.get("dependencies", [])]
    for extra, deps in sorted(project.get("optional-dependencies", {}).items()):
        lines.append("Provides-Extra: " + extra)
        lines += ['Requires-Dist: %s; extra == "%s"' % (d, extra) for d in deps]
    lines.append("Description-Content-Type: text/markdown")
    return "\n".join(lines) + "\n\n" + readme


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", required=True, help="the vidfs binary to ship as the vidfs command")
    ap.add_argument("--out", required=True, help="directory to write the wheel into")
    ap.add_argument("--epoch", type=int, default=int(time.time()), help="timestamp of every entry")
    ap.add_argument("licenses", nargs="*", help="files for .dist-info/licenses")
    args = ap.parse_args()

    with open(os.path.join(PYTHON, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    with open(os.path.join(PYTHON, "vidfs.py"), "rb") as f:
        module = f.read()
    m = re.search(rb'^__version__ = "([^"]+)"$', module, re.M)
    if not m:
        sys.exit("wheel.py: python/vidfs.py has no __version__ line")
    version = m.group(1).decode()
    with open(os.path.join(PYTHON, project["readme"]), encoding="utf-8") as f:
        readme = f.read()
    with open(args.binary, "rb") as f:
        binary = f.read()

    name = project["name"]
    dist_info = "%s-%s.dist-info" % (name, version)
    entries = [  # (path in the wheel, bytes, executable)
        ("vidfs.py", module, False),
        ("%s-%s.data/scripts/vidfs" % (name, version), binary, True),
    ]
    for path in args.licenses:
        with open(path, "rb") as f:
            entries.append(("%s/licenses/%s" % (dist_info, os.path.basename(path)), f.read(), False))
    entries.append((dist_info + "/METADATA", metadata(project, version, readme).encode(), False))
    wheel_file = "Wheel-Version: 1.0\nGenerator: vidfs scripts/wheel.py\nRoot-Is-Purelib: false\nTag: %s\n" % TAG
    entries.append((dist_info + "/WHEEL", wheel_file.encode(), False))

    record = []
    for path, data, _ in entries:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d" % (path, digest, len(data)))
    record.append(dist_info + "/RECORD,,")
    entries.append((dist_info + "/RECORD", ("\n".join(record) + "\n").encode(), False))

    out = os.path.join(args.out, "%s-%s-%s.whl" % (name, version, TAG))
    stamp = time.gmtime(max(args.epoch, 315532800))[:6]  # zip times start in 1980
    tmp = out + ".tmp"
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for path, data, executable in entries:
            info = zipfile.ZipInfo(path, date_time=stamp)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (0o100755 if executable else 0o100644) << 16
            z.writestr(info, data)
    os.replace(tmp, out)
    print(out)


if __name__ == "__main__":
    main()
