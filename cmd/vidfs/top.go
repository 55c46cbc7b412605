package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/vidfs/vidfs/internal/wire"
)

// isTerminal tells whether f (a stream of env) is a file that is a terminal: vidfs top draws
// only on one, and progress lines are rewritten in place only on one.
func isTerminal(f any) bool {
	file, ok := f.(*os.File)
	return ok && term.IsTerminal(int(file.Fd()))
}

func topCommand() *command {
	var interval time.Duration
	return &command{
		summary: "live dashboard of a mount",
		usage:   "MNT [--interval D]",
		help: `Shows what the mount at MNT is doing, refreshed every second: cache fill, hit rate, samples
ready ahead of the reader, decodes in flight, decode rate, seconds readers waited per second,
reads per second, latency, and recent errors. Rates are over the last interval. q quits.`,
		flags: func(fs *pflag.FlagSet) {
			fs.DurationVar(&interval, "interval", time.Second, "refresh interval")
		},
		run: func(ctx context.Context, e *env, args []string) error {
			if len(args) != 1 {
				return usageError{"want the mount point"}
			}
			lay, err := readDataset(args[0])
			for err != nil {
				// A mount still finding its videos: show how far it has got until it serves.
				sc, ok := scanningOf(args[0])
				if !ok || !isTerminal(e.stdout) {
					if ok {
						return errors.New(scanningLine(sc))
					}
					return err
				}
				fmt.Fprintf(e.stdout, "\r%s\x1b[K", scanningLine(sc))
				select {
				case <-ctx.Done():
					fmt.Fprintln(e.stdout)
					return nil
				case <-time.After(interval):
				}
				lay, err = readDataset(args[0])
			}
			if !isTerminal(e.stdout) {
				return fmt.Errorf("vidfs top draws on a terminal, and its output is not one: vidfs stats %s prints a snapshot (--json for the raw one)", args[0])
			}
			in := e.stdin
			if !isTerminal(in) {
				in = nil // keys cannot reach it: Ctrl-C quits
			}
			m := topModel{mnt: args[0], lay: lay, interval: interval}
			p := tea.NewProgram(m, tea.WithAltScreen(), tea.WithContext(ctx), tea.WithInput(in), tea.WithOutput(e.stdout))
			_, err = p.Run()
			if err == tea.ErrProgramKilled && ctx.Err() != nil {
				return nil
			}
			return err
		},
	}
}

type topModel struct {
	mnt       string
	lay       wire.Dataset
	interval  time.Duration
	cur, prev wire.Stats
	have      int // snapshots read so far
	err       error
	width     int
}

type tickMsg struct{}

type statsMsg struct {
	st  wire.Stats
	err error
}

func (m topModel) read() tea.Msg {
	st, err := readStats(m.mnt)
	return statsMsg{st, err}
}

func (m topModel) tick() tea.Cmd {
	return tea.Tick(m.interval, func(time.Time) tea.Msg { return tickMsg{} })
}

func (m topModel) Init() tea.Cmd { return tea.Batch(m.read, m.tick()) }

func (m topModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.KeyMsg:
		switch msg.String() {
		case "q", "esc", "ctrl+c":
			return m, tea.Quit
		}
	case tea.WindowSizeMsg:
		m.width = msg.Width
	case tickMsg:
		return m, tea.Batch(m.read, m.tick())
	case statsMsg:
		m.err = msg.err
		if msg.err == nil {
			m.prev, m.cur = m.cur, msg.st
			m.have++
		}
	}
	return m, nil
}

var (
	topTitle = lipgloss.NewStyle().Bold(true)
	topLabel = lipgloss.NewStyle().Bold(true).Width(9)
	topWarn  = lipgloss.NewStyle().Foreground(lipgloss.Color("1"))
)

// bar draws a gauge of fraction f, n cells wide.
func bar(f float64, n int) string {
	f = max(0, min(1, f))
	full := int(f*float64(n) + 0.5)
	return "[" + strings.Repeat("█", full) + strings.Repeat("░", n-full) + "]"
}

func (m topModel) View() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %s   (q quits)\n\n", topTitle.Render("vidfs top"), m.mnt)
	if m.err != nil {
		fmt.Fprintln(&b, topWarn.Render("cannot read stats: "+m.err.Error()))
	}
	if m.have == 0 {
		return b.String()
	}
	c, p, d, r := m.cur.Cache, m.cur.Plan, m.cur.Decode, m.cur.Reads
	// Rates over the last interval.
	dt := m.cur.UptimeSeconds - m.prev.UptimeSeconds
	rate := func(now, before float64) string {
		if m.have < 2 || dt <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f", (now-before)/dt)
	}
	pc, dc, rc := m.prev.Cache, m.prev.Decode, m.prev.Reads
	recentHit := "-"
	if h, x := c.Hits-pc.Hits, c.Misses-pc.Misses; m.have >= 2 && h+x > 0 {
		recentHit = fmt.Sprintf("%.1f %%", 100*float64(h)/float64(h+x))
	}
	line := func(label, format string, args ...any) {
		fmt.Fprintf(&b, "%s %s\n", topLabel.Render(label), fmt.Sprintf(format, args...))
	}
	line("samples", "%d of (%d, %d, %d, 3) uint8 from %s", m.cur.Samples, m.lay.Frames, m.lay.Height, m.lay.Width, m.cur.Source)
	if sc := m.cur.Scan; sc != nil {
		line("scan", "%d videos: %d probed in %.1f s (%.0f/s), %d from the probe cache, %d unreadable",
			sc.Videos, sc.Probed, sc.Seconds, sc.ProbesPerSecond, sc.FromCache, sc.Unreadable)
	}
	line("cache", "%s %d / %d samples  (%s)", bar(float64(c.UsedSamples)/float64(max(c.CapacitySamples, 1)), 30),
		c.UsedSamples, c.CapacitySamples, formatBytes(c.CapacityBytes))
	line("hit rate", "%s overall, %s last interval   (%d hits, %d misses, %d evicted)", pct(c.Hits, c.Hits+c.Misses), recentHit, c.Hits, c.Misses, c.Evicted)
	if len(m.cur.Plans) == 0 {
		line("plan", "none: write the order to %s/.vidfs/order or .vidfs/plans/NAME", m.mnt)
	}
	for _, e := range m.cur.Plans {
		state := fmt.Sprintf("%5.1f/s", e.Pace)
		if !e.Active {
			state = "idle"
		}
		line("plan", "%-10s %s position %d / %d  %s  hit %s  waited %.1f s  %d ready", e.Name,
			bar(float64(e.Position)/float64(max(e.Length, 1)), 20), e.Position, e.Length, state, pct(e.Hits, e.Hits+e.Misses), e.WaitSeconds, e.ReadyAhead)
	}
	line("ahead", "%s %d of the next %d ready, %d without a gap", bar(float64(p.ReadyInWindow)/float64(max(p.Upcoming, 1)), 30),
		p.ReadyInWindow, p.Upcoming, p.ReadyAhead)
	line("decode", "%d in flight, %d queued, %s clips/s   (%d done, %d failed, %.2f frames decoded per frame served)",
		d.InFlight, d.Queued, rate(float64(d.Clips), float64(dc.Clips)), d.Clips, d.Failed, d.Amplification)
	if t := m.cur.Tier; t != nil {
		line("tier", "%s %s / %s on disk  hit %s  %d written, %d waiting to be written, %d skipped",
			bar(float64(t.UsedBytes)/float64(max(t.CapacityBytes, 1)), 30), formatBytes(t.UsedBytes), formatBytes(t.CapacityBytes),
			pct(t.Hits, t.Hits+t.Misses), t.Written, t.Backlog, t.Skipped)
	}
	if c := m.cur.Copy; c != nil {
		line("copy", "%s %d / %d videos whole  %s / %s on disk  hit %s  %.0f frames/s kept  %d decoding whole, %d to decode",
			bar(float64(c.Complete)/float64(max(c.VideosWithSamples, 1)), 30), c.Complete, c.VideosWithSamples, formatBytes(c.UsedBytes),
			formatBytes(c.CapacityBytes), pct(c.Hits, c.Hits+c.Misses), c.FramesPerSecond, c.Filling, c.FillQueued)
		line("", "%s", copySize(c))
	}
	if f := m.cur.Fetch; f != nil {
		var pf wire.FetchStats
		if m.prev.Fetch != nil {
			pf = *m.prev.Fetch
		}
		line("fetch", "%s GETs/s  %s MB/s  %.0f ms a GET  %s KB a sample  %s / %s in memory  hit %s  %d retried, %d throttled, %d failed",
			rate(float64(f.GETs), float64(pf.GETs)), rate(float64(f.BytesFetched)/1e6, float64(pf.BytesFetched)/1e6), f.MeanLatencyMs,
			fmt.Sprintf("%.0f", f.BytesPerSample/1e3), formatBytes(f.CacheBytes), formatBytes(f.CacheCapacityBytes),
			pct(f.BlockHits, f.BlockHits+f.BlockWaits+f.BlockMisses), f.Retries, f.Throttled, f.FailedGETs)
	}
	line("readers", "waited %s s/s for decoding, %s reads/s, %s MB/s   (%.2f s waited in all)",
		rate(r.WaitSeconds, rc.WaitSeconds), rate(float64(r.Requests), float64(rc.Requests)),
		rate(float64(r.Bytes)/1e6, float64(rc.Bytes)/1e6), r.WaitSeconds)
	line("latency", "p50 %.2f ms  p90 %.2f ms  p99 %.2f ms  max %.2f ms", r.LatencyMs.P50, r.LatencyMs.P90, r.LatencyMs.P99, r.LatencyMs.Max)
	line("errors", "%d", len(m.cur.Errors))
	for i := len(m.cur.Errors) - 1; i >= 0 && i >= len(m.cur.Errors)-5; i-- {
		e := m.cur.Errors[i]
		at := ""
		if e.Frame != nil {
			at = fmt.Sprintf(" frame %d", *e.Frame)
		}
		msg := fmt.Sprintf("%s sample %d%s: %s", e.File, e.Sample, at, e.Reason)
		if m.width > 12 && len(msg) > m.width-12 {
			msg = msg[:m.width-15] + "..."
		}
		fmt.Fprintf(&b, "%s %s\n", topLabel.Render(""), topWarn.Render(msg))
	}
	return b.String()
}
