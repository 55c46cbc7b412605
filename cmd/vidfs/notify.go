package main

import (
	"log/slog"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/vidfs/vidfs/internal/catalog"
)

// notifier tells systemd (a unit of Type=notify, through NOTIFY_SOCKET) how the mount is doing:
// the scan's progress as STATUS=, READY=1 once the mount serves, STOPPING=1 as it unmounts.
// Without NOTIFY_SOCKET it sends nothing.
type notifier struct {
	log *slog.Logger

	mu   sync.Mutex // guards last; taken alone
	last time.Time  // when the scan's progress was last sent
}

// statusEvery bounds how often the scan's progress is sent: a first scan reports each of
// hundreds of thousands of videos.
const statusEvery = time.Second

func newNotifier(log *slog.Logger) *notifier { return &notifier{log: log} }

// send sends state (lines of VAR=VALUE) to systemd, if it listens.
func (n *notifier) send(state string) {
	if _, err := daemon.SdNotify(false, state); err != nil {
		n.log.Warn("could not notify systemd", "state", state, "err", err)
	}
}

// progress sends the scan's progress as STATUS=, at most once every statusEvery, and its end.
func (n *notifier) progress(p catalog.Progress) {
	n.mu.Lock()
	due := p.Final || time.Since(n.last) >= statusEvery
	if due {
		n.last = time.Now()
	}
	n.mu.Unlock()
	if due && (p.Total > 0 || p.Final) {
		n.send("STATUS=" + progressLine(p))
	}
}

// ready says the mount serves.
func (n *notifier) ready(status string) { n.send(daemon.SdNotifyReady + "\nSTATUS=" + status) }

// stopping says the mount is going away.
func (n *notifier) stopping(status string) { n.send(daemon.SdNotifyStopping + "\nSTATUS=" + status) }
