package main

import (
	"errors"
	"time"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/catalog"
	"github.com/vidfs/vidfs/internal/wire"
	"github.com/vidfs/vidfs/layout"
)

// arrange lays scanned videos out under spec: the layout of the readable ones, their probe
// tables in the layout's video order (for fs.Config.Infos), and the unreadable ones, left out,
// as problems (for fs.Config.Skipped).
func arrange(spec layout.Spec, videos []catalog.Video) (*layout.Layout, []*decode.Info, []wire.Problem, error) {
	var lv []layout.Video
	infos := map[string]*decode.Info{}
	var skipped []wire.Problem
	for _, v := range videos {
		if v.Err != nil {
			skipped = append(skipped, problemOf(v.Rel, -1, v.Err))
			continue
		}
		lv = append(lv, layout.Video{Path: v.Rel, Frames: v.Info.Frames, Size: v.File.Size, ModTime: v.File.ModTime})
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

// problemOf is err, a failure of file (and of sample, or -1 for the whole video), as reports list
// it: the reason alone, with the frame apart when err is a *decode.Error, so that no report has
// to cut the path out of the text.
func problemOf(file string, sample int, err error) wire.Problem {
	p := wire.Problem{Time: time.Now(), File: file, Sample: sample, Reason: err.Error()}
	var de *decode.Error
	if errors.As(err, &de) {
		p.Reason, p.Frame = de.Reason(), de.Frame
	}
	return p
}
