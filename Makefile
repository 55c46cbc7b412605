# vidfs. `make demo` and `make test` do all set-up on a fresh Debian 12 machine as root
# (Debian packages, then FFmpeg 7.1 built once into ~/.cache/vidfs); see README.md.

GO      ?= go
# Runs go with FFmpeg 7's pkg-config directory: a system FFmpeg 7, or the cached build.
GOENV    = scripts/with-ffmpeg

.PHONY: all deps build test test-short demo bench bench-decode bench-tier bench-random bench-copy bench-isolation bench-scale bench-scale-large bench-soak bench-s3 testdata dist test-dist image test-image clean help

all: build

help:
	@echo "make build   build bin/vidfs (runs make deps first)"
	@echo "make test    install test needs, vet, run every test with the race detector"
	@echo "make demo    mount the bundled sample videos, read them through NumPy, report"
	@echo "make bench   benchmarks (see docs/benchmarks.md)"
	@echo "make deps    Debian packages for building, and FFmpeg 7.1 (cached)"
	@echo "make dist    the release: dist/vidfs-VERSION-linux-x86_64.tar.gz and the wheel (as root)"
	@echo "make test-dist  the release installed and run in Ubuntu 22.04/24.04, Debian 11 userlands"
	@echo "make image   the container image of the release, with podman (IMAGE_BASE, IMAGE_TAG)"
	@echo "make test-image  the image's tests with the release on an Ubuntu 24.04 base"

deps:
	scripts/setup.sh build

build: deps
	$(GOENV) $(GO) build -o bin/vidfs ./cmd/vidfs

test:
	scripts/setup.sh test
	@unformatted=$$(gofmt -l .); if [ -n "$$unformatted" ]; then echo "not gofmt-ed: $$unformatted"; exit 1; fi
	@# go.mod and go.sum as go mod tidy leaves them: every module imported required directly, none
	@# unused (go mod tidy -diff changes nothing, prints what it would change, and fails if any).
	@if ! untidy=$$($(GO) mod tidy -diff 2>&1); then echo "go.mod/go.sum are not tidy (run: go mod tidy), or go mod tidy -diff could not check them:"; echo "$$untidy"; exit 1; fi
	$(GOENV) $(GO) vet -tags vidfstest ./...
	$(GOENV) $(GO) vet ./isolate/
	# bin/vidfs, which the container image's test (deploy/image) puts in its image, built here
	# rather than in the test (VIDFS_IMAGE_BINARY below).
	$(GOENV) $(GO) build -o bin/vidfs ./cmd/vidfs
	# -tags vidfstest: the test-only hooks (a video that crashes its decoder helper, a helper that
	# tries what its sandbox forbids), absent from release builds.
	# -timeout: a busy or slow machine must not fail the packages whose mounts take minutes under
	# the race detector for it.
	# -p 4: four packages at once. Their tests wait much of the time on mounts, helpers and
	# servers of their own, so two at a time (go test's default on 2 cores) left the cores idle
	# 40 % of the run (773 s, with other work at nice 19 beside), four 14 % (577 s, alone).
	# -skip: cmd/vidfs's memory bounds run once, below, without the race detector, whose shadow
	# memory widens them: under it they would check the same claims more loosely (the hits one
	# bounds nothing), and no race: the mount runs in a process of its own, and these tests do not
	# read its log for the detector's reports, as the tests of unmounting and of helper faults do.
	# decode's TestConformance too: it decodes in one goroutine through one pool (the detector
	# finds nothing there that the concurrent tests of decode, isolate and fs would not), and
	# takes 77 s of CPU under it against 35 s without, beside the memory bounds.
	VIDFS_IMAGE_BINARY=$(CURDIR)/bin/vidfs $(GOENV) $(GO) test -race -p 4 -count=1 -timeout 30m -tags vidfstest -skip '^(TestMount(Hits)?MemoryBound|TestConformance)$$' ./...
	$(GOENV) $(GO) test -count=1 -tags vidfstest -run '^(TestMount(Hits)?MemoryBound|TestConformance)$$' ./cmd/vidfs/ ./decode/

# The same without the race detector: quicker while working.
test-short:
	$(GOENV) $(GO) test -count=1 -tags vidfstest ./...

demo: build
	scripts/setup.sh demo
	scripts/demo.sh

# Decode benchmarks (vidfs, PyAV, ffmpeg floor), then every loader side by side, fio, vidfs bench;
# then the disk tier, --decode fast, one paced reader, memory maps and memory by part (bench/beyond.py);
# then random clips each epoch, with and without the training copy (bench/random_clips.py); then scale:
# 40, 1,000 and 10,000 videos (bench/scale.py); then a bucket through 20 and 100 ms of round trip
# (bench/s3.py); all figures go into docs/benchmarks.md and docs/benchmarks*.png.
# About 50 minutes on 2 cores.
bench: build bin/s3serve
	scripts/setup.sh bench
	scripts/bench-decode.sh 2
	/usr/bin/python3 bench/run.py
	/usr/bin/python3 bench/beyond.py
	/usr/bin/python3 bench/random_clips.py --doc docs/benchmarks.md
	/usr/bin/python3 bench/copy_policy.py --doc docs/benchmarks.md
	/usr/bin/python3 bench/scale.py --sizes $(SCALE_SIZES) --doc docs/benchmarks.md
	/usr/bin/python3 bench/s3.py --doc docs/benchmarks.md

bench-decode: build
	scripts/setup.sh bench
	scripts/bench-decode.sh

# The disk tier's part of make bench alone (each codec, one reader's hit costs, the codecs on one
# core), printed rather than written into docs/benchmarks.md. About 15 minutes on 2 cores.
bench-tier: build
	scripts/setup.sh bench
	/usr/bin/python3 bench/beyond.py --only-tier

# Random clips each epoch (issues 32, 39) alone, printed: PlanSampler(clips="random") on a dense grid
# (--step 4) of 24 videos of 10 s or more at 480p, 12 of them with 2 clips a video (issue 39's run),
# and 8 at 1080p (bench/dataset10.sh), epochs 1-6 without the training copy, with its defaults, with it
# (fill clips with each codec, fill videos), and the pre-decoded .npy ceiling (bench/random_clips.py
# --help). About 12 minutes on 2 cores; the first run also decodes the ceilings (a few minutes more).
# bench/copy_memory.py: a mount keeping a copy at 40 and 240,000 videos, its memory and collections.
bench-random: build
	scripts/setup.sh bench
	/usr/bin/python3 bench/random_clips.py
	/usr/bin/python3 bench/copy_policy.py

# The training copy's policy at a real run's shape (issue 47) alone, printed: 12 videos of 10 s at
# 480p, 2 random clips a video, no copy against the copy's defaults read flat out and paced (a
# trainer bound by its GPU), told its epochs, half of it fitting, two nodes, and the mount's estimate
# of the whole copy (bench/copy_policy.py --help). About 10 minutes a round on 2 cores.
bench-copy: build
	scripts/setup.sh bench
	/usr/bin/python3 bench/copy_policy.py

# Scale (issue 18) alone, printed: sources of hard links to one video, 40 videos against each of
# SCALE_SIZES (bench/scale.py --help); sources and probe caches are kept in ~/.cache/vidfs/bench/scale.
# About 10 minutes on 2 cores. bench-scale-large adds 100,000 and 240,000 videos (the first run
# probes them: minutes). bench-soak: 16 readers for SOAK_SECONDS, the resident memory against the
# cache's 256 MiB plus 150 MiB (bench/soak.py), then 16 readers of cached samples alone (--hits), then
# the first again with a training copy filling and serving (--copy).
SCALE_SIZES  ?= 1000,10000
SOAK_SECONDS ?= 600

# Decoders in sandboxed helpers against in-process (issue 41): clips/s, CPU per clip, memory per
# helper, the time to replace a dead one.
bench-isolation: build
	scripts/setup.sh bench
	/usr/bin/python3 bench/isolation.py

# Exact decoding through a fresh mount against PyAV 10 on the same clips (issue 48): 24 videos at
# 480p, --frames 16 --stride 2 --size 224x224 --resize stretch --workers 1, one reader; clips per
# CPU second of the mount and its helpers against PyAV's process, taking turns, with --decode fast
# beside them (bench/pyav_mount.py --help). About 3 minutes on 2 cores.
.PHONY: bench-pyav
bench-pyav: build
	scripts/setup.sh bench
	/usr/bin/python3 bench/pyav_mount.py --fast

bench-scale: build
	scripts/setup.sh bench
	/usr/bin/python3 bench/scale.py --sizes $(SCALE_SIZES)

bench-scale-large: build
	scripts/setup.sh bench
	/usr/bin/python3 bench/scale.py --sizes $(SCALE_SIZES) --large

bench-soak: build
	scripts/setup.sh bench
	/usr/bin/python3 bench/soak.py --seconds $(SOAK_SECONDS)
	/usr/bin/python3 bench/soak.py --hits --seconds $(SOAK_SECONDS)
	/usr/bin/python3 bench/soak.py --copy --seconds $(SOAK_SECONDS)

# Object storage (issue 21) alone, printed: versitygw behind a proxy adding 20 and 100 ms of round
# trip and a 50 MB/s cap; vidfs on the bucket with and without a plan, vidfs over s3fs-fuse, and
# local disk, taking turns, paced (bench/s3.py --help). About 10 minutes on 2 cores.
bench-s3: build bin/s3serve
	scripts/setup.sh bench
	/usr/bin/python3 bench/s3.py

# The S3 benchmark's server: versitygw and internal/s3test's proxy, driven on stdin.
bin/s3serve: build
	$(GOENV) $(GO) build -o bin/s3serve ./internal/s3test/s3serve

# The release, built in a Debian 11 userland to start on glibc 2.31 and later:
# dist/vidfs-VERSION-linux-x86_64.tar.gz and dist/vidfs-VERSION-py3-none-manylinux_2_31_x86_64.whl.
# The first run makes the userland and builds dav1d and FFmpeg in it (33 minutes on a busy 2-core
# machine), cached in ~/.cache/vidfs/dist; later runs rebuild vidfs only, in seconds.
dist:
	scripts/setup.sh dist
	scripts/dist.sh

# The release checked: what the binary links, then the wheel installed, mounted and read in
# Ubuntu 22.04, Ubuntu 24.04 and Debian 11 userlands, against bin/vidfs's reads on this machine.
test-dist: build dist
	scripts/setup.sh test-dist
	scripts/test-dist.sh

# The container image (deploy/image/Dockerfile): the release on IMAGE_BASE, built with podman as
# IMAGE_TAG. IMAGE_BASE defaults to the Dockerfile's ubuntu:24.04, from a registry; where none is
# reachable, IMAGE_BASE=$$(scripts/image.sh base noble) makes a local one with debootstrap.
VERSION    = $(shell sed -n 's/^__version__ = "\(.*\)"$$/\1/p' python/vidfs.py)
IMAGE_TAG ?= vidfs:$(VERSION)
IMAGE_BASE ?=

image: dist
	scripts/setup.sh image
	scripts/image.sh build $(IMAGE_TAG) dist $(IMAGE_BASE)

# The image's tests (deploy/image) with the release in it, on Ubuntu 24.04 made with debootstrap
# (make test runs them with this machine's build, on Debian 12). 20 s once the bases are made.
test-image: build dist
	scripts/setup.sh test
	VIDFS_IMAGE_RELEASE=$(CURDIR)/dist/vidfs-$(VERSION)-linux-x86_64.tar.gz $(GOENV) $(GO) test -race -count=1 -run 'TestImage' ./deploy/image/

# Regenerates the committed test videos (needs Debian's ffmpeg CLI).
testdata:
	testdata/gen.sh

clean:
	rm -rf bin dist
