package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"sort"
	"strings"

	project "github.com/vidfs/vidfs"
	"github.com/vidfs/vidfs/decode"
)

func versionCommand() *command {
	return &command{
		summary: "print the versions of vidfs, FFmpeg and Go, and the decoders built in",
		usage:   "",
		help: `Prints vidfs's version, the FFmpeg it was built with (version, licence, configure line),
the Go version, the C library it runs on, the hardware decoders (hwaccels) built in and whether
an NVIDIA GPU is usable for them here, which decoders run sandboxed (NVDEC's do not yet), and every
video decoder built in. Paste it into bug reports. ` + "`vidfs --version`" + ` prints the first line only.`,
		run: func(ctx context.Context, e *env, args []string) error {
			if len(args) > 0 {
				return usageError{"version takes no arguments"}
			}
			printVersion(e.stdout)
			return nil
		},
	}
}

// versionLine is `vidfs --version`'s answer.
func versionLine() string { return "vidfs " + project.Version() }

func printVersion(w io.Writer) {
	fmt.Fprintln(w, versionLine())
	fmt.Fprintf(w, "Go:         %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(w, "FFmpeg:     %s (%s)\n", decode.FFmpegVersion(), decode.FFmpegLicense())
	fmt.Fprintf(w, "configure:  %s\n", decode.FFmpegConfiguration())
	fmt.Fprintf(w, "glibc:      %s (this machine's)\n", decode.LibcVersion())
	hw := decode.HWAccels()
	types := make([]string, 0, len(hw))
	for t := range hw {
		types = append(types, t)
	}
	sort.Strings(types)
	if len(types) == 0 {
		fmt.Fprintln(w, "hwaccels:   none")
	}
	for i, t := range types {
		label := "hwaccels:"
		if i > 0 {
			label = ""
		}
		fmt.Fprintf(w, "%-11s %s: %s\n", label, t, strings.Join(hw[t], " "))
	}
	if _, ok := hw["cuda"]; ok {
		gpu := "usable (NVDEC; the driver's libcuda.so.1 and libnvcuvid.so.1, loaded at run time)"
		if err := decode.CheckGPU(); err != nil {
			gpu = err.Error()
		}
		fmt.Fprintf(w, "GPU:        %s\n", gpu)
	}
	fmt.Fprintln(w, "sandbox:    CPU decoders and probes run in sandboxed helper processes (--decoders isolated, the default);")
	fmt.Fprintln(w, "            NVDEC decoders do not: a mount that decodes on a GPU decodes in its own process, not sandboxed")
	dec := decode.VideoDecoders()
	fmt.Fprintf(w, "decoders:   %d video decoders:\n", len(dec))
	line := " "
	for _, d := range dec {
		if len(line)+1+len(d) > 100 {
			fmt.Fprintln(w, line)
			line = " "
		}
		line += " " + d
	}
	if strings.TrimSpace(line) != "" {
		fmt.Fprintln(w, line)
	}
}
