package main

import (
	"fmt"
	"log/slog"

	"github.com/vidfs/vidfs/decode"
	vfs "github.com/vidfs/vidfs/fs"
	"github.com/vidfs/vidfs/isolate"
)

// Where a mount's decoders run: in sandboxed helper processes (isolate), or in its own.

const (
	decodersIsolated  = "isolated"
	decodersInProcess = "in-process"
)

// mountDecoder decodes a mount's samples: isolate.Decoders or a decode.Pool.
type mountDecoder interface {
	vfs.Decoder
	UnusableKeyframes() map[string][]int
	Close()
}

// newDecoder makes the mount's decoders for workers: with --decoders isolated, helpers for as
// many clips at once as the mount decodes (fs.Decoders), two each, unless NVDEC serves: GPU
// decoders are not in helpers yet, so a mount that decodes on a GPU decodes in-process, and says
// so.
func (o *mountOptions) newDecoder(workers int, log *slog.Logger, open decode.Opener) (mountDecoder, error) {
	inProcess := func() (*decode.Pool, error) {
		// One decoder per load the cache may run at once; as many kept open between clips as it
		// prefetches at once.
		return decode.NewPool(decode.PoolOptions{Concurrency: vfs.Decoders(workers), Idle: workers, Threads: 1,
			HWAccel: o.hwaccel.h, GPUs: o.gpus.gpus, GPUDecoders: o.gpuDecoders, Log: log, Open: open})
	}
	switch o.decoders {
	case decodersInProcess:
		log.Info("decoding in the mount's own process (--decoders in-process): a crash in a decoder ends the mount")
		return inProcess()
	case decodersIsolated:
	default:
		return nil, usageError{fmt.Sprintf("--decoders %q: want isolated or in-process", o.decoders)}
	}
	if o.hwaccel.h != decode.HWNone {
		pool, err := inProcess()
		if err != nil {
			return nil, err
		}
		if len(pool.Stats().GPUs) > 0 {
			log.Warn("NVDEC decodes in the mount's own process: GPU decoders are not in sandboxed helpers yet, so a crash in one ends the mount and a hostile video reaches the mount's privileges; --hwaccel none isolates every decoder")
			return pool, nil
		}
		pool.Close()
	}
	const each = 2
	return isolate.New(isolate.Options{Helpers: (vfs.Decoders(workers) + each - 1) / each, PerHelper: each, Open: open,
		Deadline: o.decodeDeadline, Log: log})
}
