package main

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/vidfs/vidfs/decode"
	vfs "github.com/vidfs/vidfs/fs"
	"github.com/vidfs/vidfs/internal/catalog"
	"github.com/vidfs/vidfs/internal/labels"
	"github.com/vidfs/vidfs/internal/wire"
	"github.com/vidfs/vidfs/layout"
)

// arrange lays scanned videos out under spec: the layout of the readable ones, where their probe
// tables lie (in the layout's video order), and those left out, as problems (for
// fs.Config.Skipped): the unreadable ones, and apart, with a labels rule that does not keep them,
// the readable ones its file does not name. Under a target rate (spec.FPS) a video's length is
// its length at that rate. With a labels rule (nil: the classes are SRC's folders) the classes are
// every label of its file.
func arrange(spec layout.Spec, videos []catalog.Video, rule *labelRule) (*layout.Layout, []catalog.Ref, []wire.Problem, []wire.Problem, error) {
	fps := decode.Rational{Num: spec.FPS.Num, Den: spec.FPS.Den}
	var lv []layout.Video
	var refs []catalog.Ref // per video of lv
	var skipped, unlabelled []wire.Problem
	for _, v := range videos {
		if v.Err != nil {
			skipped = append(skipped, vfs.ProblemOf(v.Rel, -1, v.Err))
			continue
		}
		if rule != nil && !rule.keep {
			if _, ok := rule.file.Label(v.Rel); !ok {
				unlabelled = append(unlabelled, wire.Problem{Time: time.Now(), File: v.Rel, Sample: -1,
					Reason: fmt.Sprintf("not named in the labels file %s (--unlabelled skip)", rule.file.Name)})
				continue
			}
		}
		frames := v.Brief.Frames
		if fps.Valid() {
			frames = v.Brief.FramesAt(fps)
		}
		lv = append(lv, layout.Video{Path: v.Rel, Frames: frames, Size: v.File.Size, ModTime: v.File.ModTime})
		refs = append(refs, v.Table)
	}
	var classes layout.Classes
	if rule != nil {
		classes = layout.Classes{Of: rule.file.Label, Names: rule.file.Classes}
	}
	lay, err := layout.NewClassified(spec, lv, classes)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	// Both are sorted by path: the layout's videos are those of lv, in the same order.
	for i, v := range lay.Videos {
		if v.Path != lv[i].Path {
			return nil, nil, nil, nil, fmt.Errorf("video %s: out of order with the scan's %s", v.Path, lv[i].Path)
		}
	}
	return lay, refs, skipped, unlabelled, nil
}

// labelRule is --labels and --unlabelled: the videos' classes from a labels file, and whether a
// video the file does not name is kept, with no class (label -1), or left out.
type labelRule struct {
	file *labels.File
	keep bool
}

// report logs, once each, the videos the labels file does not name (left out or kept without a
// class: how many, and the first few), and the paths it names that are no video found (a
// warning, not an error: a file made for several splits names videos of the others).
func (r *labelRule) report(log *slog.Logger, videos []catalog.Video, lay *layout.Layout) {
	const few = 5
	var unnamed []string
	n := 0
	for _, v := range videos {
		if _, ok := r.file.Label(v.Rel); !ok && v.Err == nil {
			if n < few {
				unnamed = append(unnamed, v.Rel)
			}
			n++
		}
	}
	switch {
	case n > 0 && r.keep:
		log.Warn("videos the labels file does not name are kept with label -1 (--unlabelled keep)", "file", r.file.Name, "count", n, "first", strings.Join(unnamed, ", "))
	case n > 0:
		log.Warn("videos the labels file does not name are left out (--unlabelled skip; .vidfs/stats lists them)", "file", r.file.Name, "count", n, "first", strings.Join(unnamed, ", "))
	}
	var missing []string
	for p := range r.file.Paths() {
		if _, found := slices.BinarySearchFunc(videos, p, func(v catalog.Video, p string) int { return strings.Compare(v.Rel, p) }); !found {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		log.Warn("the labels file names paths that are no video under the source", "file", r.file.Name, "count", len(missing), "of", r.file.Len(), "first", strings.Join(missing[:min(len(missing), few)], ", "))
	}
	log.Info("classes from the labels file", "file", r.file.Name, "classes", len(lay.Classes), "videos_named_found", r.file.Len()-len(missing))
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
