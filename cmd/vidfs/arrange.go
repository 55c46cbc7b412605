package main

import (
	"fmt"

	"github.com/vidfs/vidfs/decode"
	vfs "github.com/vidfs/vidfs/fs"
	"github.com/vidfs/vidfs/internal/catalog"
	"github.com/vidfs/vidfs/internal/wire"
	"github.com/vidfs/vidfs/layout"
)

// arrange lays scanned videos out under spec: the layout of the readable ones, where their probe
// tables lie (in the layout's video order), and the unreadable ones, left out, as problems (for
// fs.Config.Skipped). Under a target rate (spec.FPS) a video's length is its length at that rate.
func arrange(spec layout.Spec, videos []catalog.Video) (*layout.Layout, []catalog.Ref, []wire.Problem, error) {
	fps := decode.Rational{Num: spec.FPS.Num, Den: spec.FPS.Den}
	var lv []layout.Video
	var skipped []wire.Problem
	for _, v := range videos {
		if v.Err != nil {
			skipped = append(skipped, vfs.ProblemOf(v.Rel, -1, v.Err))
			continue
		}
		frames := v.Brief.Frames
		if fps.Valid() {
			frames = v.Brief.FramesAt(fps)
		}
		lv = append(lv, layout.Video{Path: v.Rel, Frames: frames, Size: v.File.Size, ModTime: v.File.ModTime})
	}
	lay, err := layout.New(spec, lv)
	if err != nil {
		return nil, nil, nil, err
	}
	// Both are sorted by path: the layout's videos are the readable ones, in the same order.
	refs := make([]catalog.Ref, 0, len(lay.Videos))
	for _, v := range videos {
		if v.Err == nil {
			refs = append(refs, v.Table)
		}
	}
	for i, v := range lay.Videos {
		if v.Path != lv[i].Path {
			return nil, nil, nil, fmt.Errorf("video %s: out of order with the scan's %s", v.Path, lv[i].Path)
		}
	}
	return lay, refs, skipped, nil
}

// videoTables gives fs the probe table of each laid-out video from the scan's tables, read when
// the video is decoded.
type videoTables struct {
	tables *catalog.Tables
	refs   []catalog.Ref // per video of lay
	src    catalog.Files
	lay    *layout.Layout
}

// Info returns video v's probe table (Tables.Info: one that cannot be read is probed again, once).
func (t *videoTables) Info(v int) (*decode.Info, error) {
	return t.tables.Info(t.refs[v], t.src.Path(t.lay.Videos[v].Path))
}
