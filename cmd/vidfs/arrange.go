package main

import (
	"github.com/vidfs/vidfs/decode"
	vfs "github.com/vidfs/vidfs/fs"
	"github.com/vidfs/vidfs/internal/catalog"
	"github.com/vidfs/vidfs/internal/wire"
	"github.com/vidfs/vidfs/layout"
)

// arrange lays scanned videos out under spec: the layout of the readable ones, their probe
// tables in the layout's video order (for fs.Config.Infos), and the unreadable ones, left out,
// as problems (for fs.Config.Skipped). Under a target rate (spec.FPS) a video's length is its
// length at that rate.
func arrange(spec layout.Spec, videos []catalog.Video) (*layout.Layout, []*decode.Info, []wire.Problem, error) {
	fps := decode.Rational{Num: spec.FPS.Num, Den: spec.FPS.Den}
	var lv []layout.Video
	infos := map[string]*decode.Info{}
	var skipped []wire.Problem
	for _, v := range videos {
		if v.Err != nil {
			skipped = append(skipped, vfs.ProblemOf(v.Rel, -1, v.Err))
			continue
		}
		frames := v.Info.Frames
		if fps.Valid() {
			frames = v.Info.FramesAt(fps)
		}
		lv = append(lv, layout.Video{Path: v.Rel, Frames: frames, Size: v.File.Size, ModTime: v.File.ModTime})
		infos[v.Rel] = v.Info
	}
	lay, err := layout.New(spec, lv)
	if err != nil {
		return nil, nil, nil, err
	}
	ordered := make([]*decode.Info, len(lay.Videos))
	for i, v := range lay.Videos {
		ordered[i] = infos[v.Path]
	}
	return lay, ordered, skipped, nil
}
