package fs

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/wire"
)

// maxProblems bounds the problems kept for reports.
const maxProblems = 100

// problemLog keeps the last maxProblems things that could not be served, for .vidfs/stats: the
// videos left out of the layout, each sample the cache holds failed (as the cache tells it, once),
// and plans refused. It is a log of events; what failed, and why, is the cache's record.
type problemLog struct {
	mu   sync.Mutex // guards list; nothing else is locked while it is held
	list []wire.Problem
}

// init starts the log with the videos left out of the layout (the first maxProblems of them, and
// a line that counts the rest).
func (l *problemLog) init(source string, skipped []wire.Problem) {
	l.list = append(l.list, skipped[:min(len(skipped), maxProblems)]...)
	if n := len(skipped) - maxProblems; n > 0 {
		l.list = append(l.list, wire.Problem{Time: time.Now(), File: source, Sample: -1,
			Reason: fmt.Sprintf("%d more videos left out (the mount's log names the first 20)", n)})
	}
}

func (l *problemLog) add(p wire.Problem) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.list = append(l.list, p)
	if len(l.list) > maxProblems {
		l.list = l.list[len(l.list)-maxProblems:]
	}
}

func (l *problemLog) snapshot() []wire.Problem {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]wire.Problem{}, l.list...)
}

// ProblemOf is err, a failure of file (and of sample, or -1 for the whole video), as reports list
// it: the reason alone, with the frame apart when err is a *decode.Error, so that no report has
// to cut the path out of the text.
func ProblemOf(file string, sample int, err error) wire.Problem {
	p := wire.Problem{Time: time.Now(), File: file, Sample: sample, Reason: err.Error()}
	var de *decode.Error
	if errors.As(err, &de) {
		p.Reason, p.Frame = de.Reason(), de.Frame
	}
	return p
}
