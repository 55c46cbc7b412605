package main

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestSystemdNotify: a mount run as a systemd unit of Type=notify would be, with NOTIFY_SOCKET
// set, reports the scan's progress (STATUS=), READY=1 once it serves (after the scan, with the
// files readable), and STOPPING=1 when it unmounts, in that order.
func TestSystemdNotify(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const end = "END-OF-TEST"
	got := make(chan []string, 1)
	go func() {
		var msgs []string
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil || string(buf[:n]) == end {
				got <- msgs
				return
			}
			msgs = append(msgs, string(buf[:n]))
		}
	}()
	t.Setenv("NOTIFY_SOCKET", sock)
	m := startMount(t, makeSource(t), "--cache-mem", "16MiB", "--workers", "2", "--size", "32x32", "--probe-cache", "")
	if _, err := os.Stat(filepath.Join(m.dir, "clips.raw")); err != nil {
		t.Fatal(err)
	}
	m.cmd.Process.Signal(syscall.SIGTERM)
	err = <-m.done
	m.done <- err // for the cleanup
	if err != nil {
		t.Fatalf("vidfs mount: %v\n%s", err, m.log())
	}
	// The process has exited: all it sent is queued ahead of this.
	w, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte(end))
	w.Close()
	msgs := <-got

	find := func(what string) int {
		return slices.IndexFunc(msgs, func(m string) bool { return slices.Contains(strings.Split(m, "\n"), what) })
	}
	scanning := slices.IndexFunc(msgs, func(m string) bool { return strings.HasPrefix(m, "STATUS=scanned ") })
	ready, stopping := find("READY=1"), find("STOPPING=1")
	if scanning < 0 || ready < 0 || stopping < 0 || !(scanning < ready && ready < stopping) {
		t.Fatalf("notifications %q: want STATUS=scanned ..., then READY=1, then STOPPING=1", msgs)
	}
}
