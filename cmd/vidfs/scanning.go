package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/google/renameio/v2"

	"github.com/vidfs/vidfs/internal/catalog"
	"github.com/vidfs/vidfs/internal/wire"
)

// A mount is not there while it finds and probes its videos (minutes, for hundreds of thousands
// of them), so it cannot serve MNT/.vidfs/stats yet. Meanwhile it writes its progress, about
// once a second, to a file beside its log (scanFile), and vidfs stats and vidfs top read that
// where MNT is not mounted yet. The file goes when the mount serves.

// scanFile is where a mount on mnt writes its scan's progress.
func scanFile(mnt string) string { return mountFilesBase(mnt) + ".scan.json" }

// scanReport writes a scan's progress to scanFile(mnt).
type scanReport struct {
	path, mnt string
	log       *slog.Logger
	last      time.Time
	failed    bool // the file could not be written: said once, not tried again
}

// newScanReport returns a report for a mount on mnt (an absolute path). A scan over within a
// second (a remount from the probe cache) writes nothing.
func newScanReport(mnt string, log *slog.Logger) *scanReport {
	return &scanReport{path: scanFile(mnt), mnt: mnt, log: log, last: time.Now()}
}

// update writes p, at most once a second; not the final one: the caller removes the file then.
func (r *scanReport) update(p catalog.Progress) {
	if r.failed || p.Final || time.Since(r.last) < time.Second {
		return
	}
	r.last = time.Now()
	sc := wire.Scanning{PID: os.Getpid(), Mountpoint: r.mnt, Scan: wire.ScanStats{Videos: p.Total, Probed: p.Done - p.Cached,
		FromCache: p.Cached, Unreadable: p.Failed, Seconds: p.Elapsed.Seconds(), ProbesPerSecond: p.Rate(), SecondsLeft: p.Left().Seconds()}}
	b, _ := json.Marshal(sc)
	err := os.MkdirAll(filepath.Dir(r.path), 0o755)
	if err == nil {
		err = renameio.WriteFile(r.path, b, 0o644)
	}
	if err != nil {
		r.failed = true
		r.log.Warn("could not write the scan's progress for vidfs stats", "file", r.path, "err", err)
	}
}

// remove deletes the progress file.
func (r *scanReport) remove() { os.Remove(r.path) }

// scanningOf returns the progress of a mount on mnt that is still scanning its videos, if one is.
func scanningOf(mnt string) (wire.Scanning, bool) {
	var sc wire.Scanning
	abs, err := filepath.Abs(mnt)
	if err != nil {
		return sc, false
	}
	b, err := os.ReadFile(scanFile(abs))
	if err != nil || json.Unmarshal(b, &sc) != nil || sc.Mountpoint != abs || sc.PID <= 0 {
		return sc, false
	}
	// The process that wrote it must still be there (one killed while scanning leaves it).
	if err := syscall.Kill(sc.PID, 0); err != nil && err != syscall.EPERM {
		return sc, false
	}
	return sc, true
}

// scanningLine says how far a scan has got.
func scanningLine(sc wire.Scanning) string {
	s := sc.Scan
	left := "time left unknown"
	if s.SecondsLeft > 0 {
		left = fmt.Sprintf("about %s left", (time.Duration(s.SecondsLeft) * time.Second).Round(time.Second))
	}
	return fmt.Sprintf("%s: not mounted yet: vidfs (pid %d) is finding its videos: %d of %d, %d probed (%.0f/s), %d from the probe cache, %d unreadable; %s",
		sc.Mountpoint, sc.PID, s.Probed+s.FromCache, s.Videos, s.Probed, s.ProbesPerSecond, s.FromCache, s.Unreadable, left)
}
