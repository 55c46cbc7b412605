package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// readyEnv names the file descriptor on which a mount started by --daemon says it serves.
const readyEnv = "VIDFS_DAEMON_READY_FD"

// daemonPaths returns where a daemon mounted on mnt logs and writes its pid, by default.
func daemonPaths(mnt string) (logFile, pidFile string) {
	base := mountFilesBase(mnt)
	return base + ".log", base + ".pid"
}

// mountFilesBase is where the files about a mount on mnt (an absolute path) live, less their
// extension: ~/.cache/vidfs/mounts/NAME-HASH.
func mountFilesBase(mnt string) string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	sum := sha256.Sum256([]byte(mnt))
	return filepath.Join(dir, "vidfs", "mounts", filepath.Base(mnt)+"-"+hex.EncodeToString(sum[:4]))
}

// daemonChild tells whether this process is the one a --daemon mount started to serve: its
// ready pipe marks it, whatever the command line says (the child is given the same one).
func daemonChild() bool { return os.Getenv(readyEnv) != "" }

// startDaemon runs this mount command again, as it was given, as a process of its own session
// logging to logFile, and returns once it serves (it then writes pidFile), or fails with what it
// logged. The child ignores --daemon: the ready pipe's variable marks it (daemonChild).
func startDaemon(e *env, args []string, mnt, logFile, pidFile string) error {
	if err := os.MkdirAll(filepath.Dir(logFile), 0o755); err != nil {
		return fmt.Errorf("--log-file: %w", err)
	}
	logf, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("--log-file: %w", err)
	}
	defer logf.Close()
	start, _ := logf.Seek(0, io.SeekEnd)
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	cmd := exec.Command(exe, append(slices.Clip(args), "--pid-file", pidFile)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, logf, logf
	cmd.ExtraFiles = []*os.File{w} // fd 3
	cmd.Env = append(os.Environ(), readyEnv+"=3")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("starting the mount: %w", err)
	}
	w.Close()
	fmt.Fprintf(e.stderr, "vidfs mount: started (pid %d, log %s); waiting until it serves\n", cmd.Process.Pid, logFile)
	line, _ := bufio.NewReader(r).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		err := cmd.Wait()
		return fmt.Errorf("the mount did not start (%v); its log says:\n%s", err, logTail(logFile, start))
	}
	pid := cmd.Process.Pid
	cmd.Process.Release()
	fmt.Fprintf(e.stdout, "vidfs mounted on %s (pid %d, pid file %s, log %s); vidfs umount %s stops it\n", mnt, pid, pidFile, logFile, mnt)
	return nil
}

// logTail is what was appended to a log file from offset on, at most its last 20 lines.
func logTail(path string, offset int64) string {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) < offset {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b[offset:]), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}

// serving tells the process that started this one with --daemon that the mount serves, and
// writes the pid file; the returned function removes the pid file.
func serving(pidFile string) (done func(), err error) {
	done = func() {}
	if pidFile != "" {
		if err := os.MkdirAll(filepath.Dir(pidFile), 0o755); err != nil {
			return done, fmt.Errorf("--pid-file: %w", err)
		}
		if err := os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
			return done, fmt.Errorf("--pid-file: %w", err)
		}
		done = func() { os.Remove(pidFile) }
	}
	if fd := os.Getenv(readyEnv); fd != "" {
		n, err := strconv.Atoi(fd)
		if err != nil {
			return done, errors.New(readyEnv + " is not a file descriptor")
		}
		f := os.NewFile(uintptr(n), "ready")
		fmt.Fprintln(f, "ready")
		f.Close()
		os.Unsetenv(readyEnv)
	}
	return done, nil
}
