package main

import (
	"fmt"
	"log/slog"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/catalog"
	"github.com/vidfs/vidfs/isolate"
	"github.com/vidfs/vidfs/load"
)

// Where a mount's decoders run: in sandboxed helper processes (isolate), or in its own.

const (
	decodersIsolated  = "isolated"
	decodersInProcess = "in-process"
)

// mountDecoder decodes a mount's samples: isolate.Decoders or a decode.Pool.
type mountDecoder interface {
	load.Decoder
	UnusableKeyframes() map[string][]int
	Close()
}

// newDecoder makes the mount's decoders for workers, and what probes its videos: with
// --decoders isolated, helpers for as many clips at once as the mount decodes (load.Decoders),
// two each, which probe the videos too (prober), unless NVDEC serves: GPU decoders are not in
// helpers yet, so a mount that decodes on a GPU decodes in-process, and says so, while its
// probes still run in helpers of their own. With --decoders in-process, the prober is nil: the
// scan probes in this process. It is made before the scan, which its helpers probe for.
//
// window is the shared memory a helper needs for a clip (its sample, and the frames it keeps for
// a training copy): helpers are as many as keep each one's within maxHelperShared.
func (o *mountOptions) newDecoder(workers int, window int64, log *slog.Logger, open decode.Opener) (mountDecoder, catalog.Prober, error) {
	inProcess := func() (*decode.Pool, error) {
		// A decoder for each clip the mount decodes at once; one kept open between clips for
		// each of its loads that decode at once, at most one a worker.
		return decode.NewPool(decode.PoolOptions{Concurrency: load.Decoders(workers, o.cores), Idle: load.IdleDecoders(workers, o.cores), Threads: 1,
			HWAccel: o.hwaccel.h, GPUs: o.gpus.gpus, GPUDecoders: o.gpuDecoders, Log: log, Open: open})
	}
	switch o.decoders {
	case decodersInProcess:
		log.Info("decoding and probing in the mount's own process (--decoders in-process): a crash in a decoder ends the mount")
		pool, err := inProcess()
		return pool, nil, err
	case decodersIsolated:
	default:
		return nil, nil, usageError{fmt.Sprintf("--decoders %q: want isolated or in-process", o.decoders)}
	}
	const each = 2
	if o.hwaccel.h != decode.HWNone {
		pool, err := inProcess()
		if err != nil {
			return nil, nil, err
		}
		if len(pool.Stats().GPUs) > 0 {
			log.Warn("NVDEC decodes in the mount's own process, not in sandboxed helpers: GPU decoders are not in helpers yet, so a crash in one ends the mount and a hostile video reaches the mount's privileges; probing stays in helpers; --hwaccel none isolates every decoder")
			probes, err := isolate.New(isolate.Options{Helpers: (o.probeWorkersOr() + each - 1) / each, PerHelper: each, Open: open,
				Deadline: o.decodeDeadline, Log: log})
			if err != nil {
				pool.Close()
				return nil, nil, err
			}
			return gpuDecoder{pool, probes}, probes, nil
		}
		pool.Close()
	}
	helpers, clips, idle := helpersFor(workers, o.cores, window)
	d, err := isolate.New(isolate.Options{Helpers: helpers, PerHelper: clips, Idle: idle, Open: open,
		Deadline: o.decodeDeadline, Log: log})
	if err != nil {
		return nil, nil, err
	}
	return d, d, nil
}

// maxHelperShared bounds the shared memory a helper can write: its windows, a clip's each.
const maxHelperShared = 32 << 20

// helpersFor is how many helpers decode for a mount of workers on cores CPUs, how many clips
// each decodes at once, and how many decoders each keeps open between clips: a helper for every
// 16 clips the mount decodes at once, at most 8, or more where their windows (window bytes a
// clip) would pass maxHelperShared; the mount's clips at once (load.Decoders: its loads' and
// fills', at most about three a core, not three a worker) and idle decoders (load.IdleDecoders,
// as an in-process mount keeps) shared among them. A helper's memory grows with its decoders, not
// with the helpers: each costs about 7 MiB of its own idle, and up to 32 MiB of frame buffers
// kept between decoders (decode's frame pool), so fewer, wider helpers hold less than one for
// every two clips (issue 51: 24 helpers at --workers 16 held 1.4 GiB). A crash costs a helper's
// clips in flight a retry each.
func helpersFor(workers, cores int, window int64) (helpers, clips, idle int) {
	n := load.Decoders(workers, cores)
	helpers = min(max(1, (n+15)/16), 8)
	per := int(max(1, maxHelperShared/max(window, 1))) // a clip at least, however large
	helpers = max(helpers, (n+per-1)/per)
	helpers = min(helpers, n)
	return helpers, (n + helpers - 1) / helpers, (load.IdleDecoders(workers, cores) + helpers - 1) / helpers
}

// gpuDecoder is a mount's decoders when NVDEC decodes: in-process, with the helpers that probe
// beside them.
type gpuDecoder struct {
	*decode.Pool
	probes *isolate.Decoders
}

// Close closes the decoders, then the probing helpers.
func (g gpuDecoder) Close() {
	g.Pool.Close()
	g.probes.Close()
}
