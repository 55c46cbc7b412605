package main

import (
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// helpSection is one heading of a command's --help and the flags listed under it.
type helpSection struct {
	heading string // "flags" for the flags outside any group
	flags   []string
	text    string // the lines between the heading and the first flag
}

// helpSections reads the flag listing of a command's --help: each heading that starts a group
// ("flags:" or a group's heading) and the flags under it, in the order printed.
func helpSections(t *testing.T, out string) []helpSection {
	t.Helper()
	headings := map[string]string{"flags:": "flags"}
	for _, h := range groupHelp[1:] {
		headings[h.heading+":"] = h.heading
	}
	flagLine := regexp.MustCompile(`^(?:  -\S, |      )--([a-z0-9-]+)`) // not a wrapped line's
	var sections []helpSection
	for _, line := range strings.Split(out, "\n") {
		if h, ok := headings[line]; ok {
			sections = append(sections, helpSection{heading: h})
			continue
		}
		if len(sections) == 0 {
			continue // the usage and the command's text
		}
		s := &sections[len(sections)-1]
		if m := flagLine.FindStringSubmatch(line); m != nil {
			s.flags = append(s.flags, m[1])
		} else if len(s.flags) == 0 {
			s.text += line + "\n"
		}
	}
	return sections
}

// TestFlagGroups: every flag of mount and verify is in exactly one group, and --help lists the
// groups in their order, each flag once, under its group's heading; the rarely needed Tuning
// group comes last.
func TestFlagGroups(t *testing.T) {
	cmds := commands()
	groupFlags := map[string]map[flagGroup][]string{}
	for _, name := range []string{"mount", "verify"} {
		fs := newFlagSet(name, cmds[name])
		want := map[string]string{} // flag -> heading
		byGroup := map[flagGroup][]string{}
		fs.VisitAll(func(f *pflag.Flag) {
			g := groupOf(f)
			if g == ungrouped || len(f.Annotations[groupKey]) != 1 {
				t.Errorf("vidfs %s --%s: in no group (annotation %q)", name, f.Name, f.Annotations[groupKey])
				return
			}
			want[f.Name] = groupHelp[g].heading
			byGroup[g] = append(byGroup[g], f.Name)
		})
		groupFlags[name] = byGroup

		code, out, _ := vidfs(t, name, "--help")
		if code != 0 {
			t.Fatalf("vidfs %s --help: exit %d", name, code)
		}
		sections := helpSections(t, out)
		got := map[string]string{}
		last, lastHeading := ungrouped, "the command's text"
		for _, s := range sections {
			g := groupNamed(s.heading)
			if g <= last {
				t.Errorf("vidfs %s --help: %q after %q: want the groups in order, none ungrouped", name, s.heading, lastHeading)
			}
			last, lastHeading = g, s.heading
			if len(s.flags) == 0 {
				t.Errorf("vidfs %s --help: %q lists no flag", name, s.heading)
			}
			for _, f := range s.flags {
				if h, twice := got[f]; twice {
					t.Errorf("vidfs %s --help: --%s under %q and %q", name, f, h, s.heading)
				}
				got[f] = s.heading
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("vidfs %s --help lists flags under\n%v\nwant\n%v", name, got, want)
		}
		if len(sections) < 2 || sections[0].heading != "Samples" || sections[len(sections)-1].heading != "Tuning" {
			t.Errorf("vidfs %s --help: groups %v; want Samples first and Tuning last", name, sections)
		}
	}

	// The disk group's text states the rules between exactly these.
	if got, want := groupFlags["mount"][diskFlags], []string{"cache-dir", "cache-disk", "cache-keep", "copy-fill", "cache-disk-codec"}; !reflect.DeepEqual(got, want) {
		t.Errorf("mount's disk group: %v; want %v", got, want)
	}
	// What decodes is said with the memory it decodes into.
	if got, want := groupFlags["mount"][memoryFlags], []string{"cache-mem", "workers", "hwaccel", "gpus", "decoders", "decode-deadline"}; !reflect.DeepEqual(got, want) {
		t.Errorf("mount's memory and decoding group: %v; want %v", got, want)
	}
	if m, v := groupFlags["mount"][sampleFlags], groupFlags["verify"][sampleFlags]; !reflect.DeepEqual(m, v) || len(m) == 0 {
		t.Errorf("samples: mount's %v, verify's %v; want the same", m, v)
	}
}

// groupNamed is the group whose heading is h: ungrouped for "flags".
func groupNamed(h string) flagGroup {
	for g := range groupHelp {
		if g > 0 && groupHelp[g].heading == h {
			return flagGroup(g)
		}
	}
	return ungrouped
}

// TestHelpListsEveryFlag: each command's --help lists every flag it takes, once, under
// "flags:" (a command without groups lists only that) or its group's heading, and a flag a
// group's text names is one the command takes.
func TestHelpListsEveryFlag(t *testing.T) {
	named := regexp.MustCompile(`--[a-z0-9-]+`)
	for name, c := range commands() {
		fs := newFlagSet(name, c)
		_, out, _ := vidfs(t, name, "--help")
		sections := helpSections(t, out)
		if len(sections) == 0 {
			t.Errorf("vidfs %s --help: no flags listed\n%s", name, out)
			continue
		}
		if !hasGroups(fs) && (len(sections) != 1 || sections[0].heading != "flags") {
			t.Errorf("vidfs %s --help: %v; want one list, under flags:", name, sections)
		}
		var listed []string
		for _, s := range sections {
			listed = append(listed, s.flags...)
			for _, f := range named.FindAllString(s.text, -1) {
				if fs.Lookup(f[2:]) == nil {
					t.Errorf("vidfs %s --help: %q's text names %s, which it does not take", name, s.heading, f)
				}
			}
		}
		var all []string
		fs.VisitAll(func(f *pflag.Flag) { all = append(all, f.Name) })
		if len(listed) != len(all) {
			t.Errorf("vidfs %s --help lists %v; want each of %v once", name, listed, all)
		}
		for _, f := range all {
			if !strings.Contains(" "+strings.Join(listed, " ")+" ", " "+f+" ") {
				t.Errorf("vidfs %s --help: --%s not listed", name, f)
			}
		}
	}
}

// TestChoiceFlagTypes: a flag of a few named values shows them in --help (its Type), and each
// one shown is taken as itself: the help names no value the flag would read as another.
func TestChoiceFlagTypes(t *testing.T) {
	for _, v := range []pflag.Value{&codecValue{}, &keepValue{}, &fillValue{}, &decodeValue{}, &hwValue{}} {
		for _, name := range strings.Split(v.Type(), "|") {
			if err := v.Set(name); err != nil {
				t.Errorf("%T: --help shows %q, which it refuses: %v", v, name, err)
			} else if got := v.String(); got != name {
				t.Errorf("%T: --help shows %q, which it reads as %q", v, name, got)
			}
		}
	}
}
