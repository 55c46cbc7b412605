// Command vidfs presents video training samples as fixed-shape tensor files through FUSE, and
// decodes them ahead of the trainer. Run `vidfs help` for the commands.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"github.com/asticode/go-astiav"
	"github.com/spf13/pflag"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/isolate"
)

// command is one `vidfs NAME` subcommand.
type command struct {
	summary string
	usage   string // arguments after the name
	help    string // what it does, for --help
	run     func(ctx context.Context, env *env, args []string) error
	flags   func(fs *pflag.FlagSet) // registers the command's flags, bound to its own options
}

// env is what a command reads and writes: the process's streams, injectable for tests, and the
// command line as given (vidfs mount --daemon runs it again).
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	args           []string
}

// usageError is a mistake on the command line: it prints the command's usage too.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func commands() map[string]*command {
	return map[string]*command{
		"probe":   probeCommand(),
		"clip":    clipCommand(),
		"mount":   mountCommand(),
		"umount":  umountCommand(),
		"stats":   statsCommand(),
		"bench":   benchCommand(),
		"top":     topCommand(),
		"verify":  verifyCommand(),
		"copy":    copyCommand(),
		"version": versionCommand(),
	}
}

func main() {
	if isolate.IsHelper() {
		os.Exit(isolate.Main()) // a mount's decoder helper, confined before main ran
	}
	decode.TuneMalloc(min(usableCores(), 8))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr}))
}

// run executes one command line and returns the exit status.
func run(ctx context.Context, args []string, e *env) int {
	e.args = args
	cmds := commands()
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) > 1 {
			if c, ok := cmds[args[1]]; ok {
				printUsage(e.stdout, args[1], c, newFlagSet(args[1], c))
				return 0
			}
		}
		printOverview(e.stdout, cmds)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] == "--version" || args[0] == "-V" {
		fmt.Fprintln(e.stdout, versionLine())
		return 0
	}
	name := args[0]
	c, ok := cmds[name]
	if !ok {
		fmt.Fprintf(e.stderr, "vidfs: unknown command %q; run `vidfs help` for the list\n", name)
		return 2
	}
	fs := newFlagSet(name, c)
	if err := fs.Parse(args[1:]); err != nil {
		if err == pflag.ErrHelp {
			printUsage(e.stdout, name, c, fs)
			return 0
		}
		fmt.Fprintf(e.stderr, "vidfs %s: %v\n", name, err)
		fmt.Fprintf(e.stderr, "run `vidfs %s --help` for usage\n", name)
		return 2
	}
	ffmpegLog, _ := fs.GetString("ffmpeg-log")
	if err := setFFmpegLog(ffmpegLog); err != nil {
		fmt.Fprintf(e.stderr, "vidfs %s: %v\n", name, err)
		return 2
	}
	if err := c.run(ctx, e, fs.Args()); err != nil {
		if ue, ok := err.(usageError); ok {
			fmt.Fprintf(e.stderr, "vidfs %s: %s\nusage: vidfs %s %s\nrun `vidfs %s --help` for details\n", name, ue.msg, name, c.usage, name)
			return 2
		}
		fmt.Fprintf(e.stderr, "vidfs %s: %v\n", name, err)
		var status interface{ ExitStatus() int } // an error that says its own exit status
		if errors.As(err, &status) {
			return status.ExitStatus()
		}
		return 1
	}
	return 0
}

func newFlagSet(name string, c *command) *pflag.FlagSet {
	fs := pflag.NewFlagSet("vidfs "+name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	if c.flags != nil {
		c.flags(fs)
	}
	ffmpegLog := func(fs *pflag.FlagSet) {
		fs.String("ffmpeg-log", "quiet", "FFmpeg's own log on stderr: quiet, error, warning, info or debug")
	}
	if hasGroups(fs) { // a command whose --help groups its flags lists this one under Tuning
		grouped(fs, tuningFlags, ffmpegLog)
	} else {
		ffmpegLog(fs)
	}
	return fs
}

func printOverview(w io.Writer, cmds map[string]*command) {
	fmt.Fprint(w, `vidfs presents video training samples (clips of T frames, resized to H x W, RGB uint8) as
fixed-shape tensor files, and decodes them ahead of the reader.

usage: vidfs COMMAND [ARGS] [FLAGS]
       vidfs --version

commands:
`)
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, cmds[n].summary)
	}
	fmt.Fprint(w, "\nRun `vidfs COMMAND --help` for a command's arguments and flags.\n")
}

// setFFmpegLog sets how much FFmpeg itself prints (its log is process-wide).
func setFFmpegLog(level string) error {
	levels := map[string]astiav.LogLevel{
		"quiet": astiav.LogLevelQuiet, "error": astiav.LogLevelError, "warning": astiav.LogLevelWarning,
		"info": astiav.LogLevelInfo, "debug": astiav.LogLevelDebug,
	}
	l, ok := levels[level]
	if !ok {
		return fmt.Errorf("--ffmpeg-log %q: want quiet, error, warning, info or debug", level)
	}
	astiav.SetLogLevel(l)
	return nil
}
