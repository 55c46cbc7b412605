package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// flagGroup is a heading in a command's --help: the flags registered in it (see grouped) are
// listed under it, in the order they were registered. The groups are listed in the order below;
// a command's flags outside any group come first, under "flags:". A command without groups
// lists its flags as one list.
type flagGroup int

const (
	ungrouped   flagGroup = iota
	sampleFlags           // what a sample is: mount's and verify's layout
	checkFlags            // verify: what it checks and how it reports
	memoryFlags           // mount: memory for samples, and what decodes them
	decodeFlags           // verify: what decodes
	diskFlags             // mount: the disk tier and the training copy
	damageFlags           // mount: damaged videos, and the plans
	s3Flags               // a source that is a bucket
	runFlags              // mount: in the background, logs, metrics, access
	tuningFlags           // rarely needed; always last
	numFlagGroups
)

// groupHelp is each group's heading and, where its flags have rules between them or need a
// word of context, the text under it (wrapped when printed).
var groupHelp = [numFlagGroups]struct{ heading, text string }{
	sampleFlags: {"Samples", "What a sample is: T frames, STRIDE apart, fitted to H x W. " +
		"vidfs mount and vidfs verify given the same ones serve and check the same samples."},
	checkFlags:  {"Checking", ""},
	memoryFlags: {"Memory and decoding", ""},
	decodeFlags: {"Decoding", ""},
	diskFlags: {"Disk (the disk tier and the training copy)", "All of these need --cache-dir. " +
		"--cache-keep says what it keeps: samples, copy (the training copy: each frame once) or auto, which picks one " +
		"and logs why. --copy-fill applies only to the training copy (--cache-keep copy). --cache-disk-codec auto picks " +
		"a codec by what is kept and whether it fits within --cache-disk uncompressed."},
	damageFlags: {"Damaged videos and plans", "What a read of a sample that cannot be decoded gets, " +
		"and how long and how large the read plans (.vidfs/order, .vidfs/plans/NAME) may be."},
	s3Flags: {"Object storage (s3://)", "For a source that is s3://BUCKET/PREFIX, with credentials " +
		"from the standard AWS chain. Its timeout and memory (--s3-timeout, --s3-cache-mem) are " +
		"under Tuning."},
	runFlags:    {"Running", ""},
	tuningFlags: {"Tuning", "Rarely needed: the defaults suit most uses."},
}

// groupKey is the annotation of a flag that holds its group's number.
const groupKey = "vidfs-group"

// grouped registers the flags that register defines (on the set it is given) on fs, in group g
// of fs's --help: a flag's group is said where the flag is registered, and nowhere else.
func grouped(fs *pflag.FlagSet, g flagGroup, register func(fs *pflag.FlagSet)) {
	in := pflag.NewFlagSet(fs.Name(), pflag.ContinueOnError)
	in.SortFlags = false
	register(in)
	in.VisitAll(func(f *pflag.Flag) {
		fs.AddFlag(f)
		if err := fs.SetAnnotation(f.Name, groupKey, []string{strconv.Itoa(int(g))}); err != nil {
			panic(err)
		}
	})
}

// groupOf is the group a flag was registered in: ungrouped if none.
func groupOf(f *pflag.Flag) flagGroup {
	v := f.Annotations[groupKey]
	if len(v) != 1 {
		return ungrouped
	}
	g, err := strconv.Atoi(v[0])
	if err != nil || g <= 0 || g >= int(numFlagGroups) {
		return ungrouped
	}
	return flagGroup(g)
}

// hasGroups says whether any of fs's flags is in a group.
func hasGroups(fs *pflag.FlagSet) bool {
	found := false
	fs.VisitAll(func(f *pflag.Flag) { found = found || groupOf(f) != ungrouped })
	return found
}

// printUsage prints a command's --help: its usage and text, then its flags by group.
func printUsage(w io.Writer, name string, c *command, fs *pflag.FlagSet) {
	fmt.Fprintf(w, "usage: vidfs %s %s\n\n%s\n", name, c.usage, strings.TrimSpace(c.help))
	var sets [numFlagGroups]*pflag.FlagSet
	fs.VisitAll(func(f *pflag.Flag) { // in the order registered
		g := groupOf(f)
		if sets[g] == nil {
			sets[g] = pflag.NewFlagSet(fs.Name(), pflag.ContinueOnError)
			sets[g].SortFlags = false
		}
		sets[g].AddFlag(f)
	})
	for g, set := range sets {
		if set == nil {
			continue
		}
		if g == int(ungrouped) {
			fmt.Fprint(w, "\nflags:\n")
		} else {
			fmt.Fprintf(w, "\n%s:\n", groupHelp[g].heading)
			for _, line := range wrap(groupHelp[g].text, 96) {
				fmt.Fprintf(w, "  %s\n", line)
			}
		}
		// Each group's own columns: the widest flag of one group does not narrow the others'.
		fmt.Fprint(w, set.FlagUsagesWrapped(100))
	}
}

// wrap breaks text into lines of at most width characters, at spaces.
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		switch {
		case line == "":
			line = word
		case len(line)+1+len(word) <= width:
			line += " " + word
		default:
			lines = append(lines, line)
			line = word
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}
