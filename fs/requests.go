package fs

// The control files a reader writes a request to: .vidfs/fill and .vidfs/epochs.

import (
	"context"
	"strconv"
	"strings"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// requestFile is a control file that takes requests: each write is one, handed to do, which
// says whether it was taken (EINVAL, for the writer, when not). Reading it gives nothing (what
// came of a request is in .vidfs/stats).
type requestFile struct {
	node
	do func(req string) bool
}

// Setattr accepts truncation (`>` truncates before it writes).
func (c *requestFile) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	c.f.attr(&out.Attr, c.mode, 0)
	return 0
}

// Open opens the file for writing requests to.
func (c *requestFile) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	return &requestHandle{do: c.do}, fuse.FOPEN_DIRECT_IO, 0
}

// requestHandle is a requestFile, open.
type requestHandle struct{ do func(req string) bool }

// Read gives nothing.
func (h *requestHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return fuse.ReadResultData(nil), 0
}

// Write hands the request to the file's do.
func (h *requestHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if !h.do(string(data)) {
		return 0, syscall.EINVAL
	}
	return uint32(len(data)), 0
}

// fillRequest is .vidfs/fill's, in a mount that keeps a training copy: "all" asks for every video
// to be decoded whole into the copy (vidfs copy; load.Loader.FillAll), "share SEED samples|videos
// NODE NODE1 NODE2 ..." for this node's share of them (this node's name, then every node's;
// load.Loader.FillShare); anything else is refused.
func (f *FS) fillRequest(data string) bool {
	req := strings.TrimSpace(data)
	const noCopy = "fill asked of a mount that keeps no training copy (--cache-dir, --cache-keep copy)"
	if w := strings.Fields(req); len(w) >= 4 && w[0] == "share" {
		seed, err := strconv.ParseUint(w[1], 10, 64)
		if err != nil || (w[2] != "samples" && w[2] != "videos") {
			f.log.Warn("fill: want \"share SEED samples|videos NODE NODES...\"", "got", req, "reason", err)
			return false
		}
		ok, err := f.load.FillShare(w[3], w[4:], seed, w[2] == "videos")
		if !ok {
			f.log.Warn(noCopy)
			return false
		}
		if err != nil {
			f.log.Warn("fill: refused", "got", req, "reason", err)
			return false
		}
		f.log.Info("training copy: this node's share of the videos queued to be decoded whole", "node", w[3], "nodes", len(w)-4, "seed", seed, "weigh", w[2])
		return true
	}
	if req != "all" {
		f.log.Warn("fill: want \"all\" or \"share SEED samples|videos NODE NODES...\"", "got", data)
		return false
	}
	if !f.load.FillAll() {
		f.log.Warn(noCopy)
		return false
	}
	f.log.Info("training copy: every video queued to be decoded whole", "videos", len(f.lay.Videos))
	return true
}

// maxEpochs bounds what .vidfs/epochs takes.
const maxEpochs = 1_000_000

// epochsRequest is .vidfs/epochs's: a reader's sampler (PlanSampler(epochs=...)) writes how many
// epochs its run has left, the current one included, at each epoch (load.Loader.EpochsLeft). Any
// mount takes it (a sampler need not know whether the mount keeps a copy); what is not a number
// from 0 to a million is refused.
func (f *FS) epochsRequest(data string) bool {
	n, err := strconv.Atoi(strings.TrimSpace(data))
	if err != nil || n < 0 || n > maxEpochs {
		f.log.Warn("epochs: want the epochs left, a number from 0 to a million", "got", data)
		return false
	}
	f.load.EpochsLeft(n)
	return true
}
