package placement

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
)

// names makes n video names like a Kinetics tree, and weights of 10-24 samples (a few 0).
func dataset(n int, seed uint64) ([]string, []int) {
	r := rand.New(rand.NewPCG(seed, 1))
	names, w := make([]string, n), make([]int, n)
	for v := range names {
		names[v] = fmt.Sprintf("train/class%03d/v%07d.mp4", v%400, v)
		w[v] = 10 + r.IntN(15)
		if v%97 == 5 {
			w[v] = 0 // too short for a sample
		}
	}
	return names, w
}

func loads(t *testing.T, at []int, w []int, nodes int) []int {
	t.Helper()
	l := make([]int, nodes)
	for v, n := range at {
		switch {
		case w[v] == 0 && n != -1:
			t.Fatalf("video %d has no samples but is on node %d", v, n)
		case w[v] > 0 && (n < 0 || n >= nodes):
			t.Fatalf("video %d on node %d of %d", v, n, nodes)
		case n >= 0:
			l[n] += w[v]
		}
	}
	return l
}

// TestAssignBalanced: every video with samples on one node, the nodes within 1/64 (plus a video)
// of an even share.
func TestAssignBalanced(t *testing.T) {
	names, w := dataset(5000, 1)
	for _, nodes := range []int{1, 2, 3, 8, 64} {
		at, err := Assign(names, w, 7, Numbered(nodes))
		if err != nil {
			t.Fatal(err)
		}
		l := loads(t, at, w, nodes)
		total := 0
		for _, x := range l {
			total += x
		}
		limit := (total*65+64*nodes-1)/(64*nodes) + 24
		for n, x := range l {
			if x > limit {
				t.Errorf("%d nodes: node %d holds %d samples, over %d (total %d)", nodes, n, x, limit, total)
			}
		}
	}
}

// TestAssignMoves: a node added or lost moves about the share it gains or had.
func TestAssignMoves(t *testing.T) {
	names, w := dataset(5000, 2)
	for _, c := range []struct {
		from, to int
		most     float64
	}{{2, 3, 0.40}, {8, 9, 0.15}, {8, 7, 0.16}, {1, 2, 0.55}} {
		for seed := uint64(0); seed < 4; seed++ {
			a, _ := Assign(names, w, seed, Numbered(c.from))
			b, _ := Assign(names, w, seed, Numbered(c.to))
			moved, placed := 0, 0
			for v := range a {
				if a[v] >= 0 {
					placed++
					if a[v] != b[v] {
						moved++
					}
				}
			}
			if f := float64(moved) / float64(placed); f > c.most {
				t.Errorf("seed %d, %d to %d nodes: %.3f of the videos moved, want at most %.2f", seed, c.from, c.to, f, c.most)
			}
		}
	}
}

// TestAssignPure: the same videos listed in another order, each on the same node; another seed
// places them otherwise.
func TestAssignPure(t *testing.T) {
	names, w := dataset(3000, 3)
	at, _ := Assign(names, w, 1, Numbered(4))
	perm := rand.New(rand.NewPCG(9, 9)).Perm(len(names))
	pn, pw := make([]string, len(names)), make([]int, len(names))
	for i, v := range perm {
		pn[i], pw[i] = names[v], w[v]
	}
	pat, _ := Assign(pn, pw, 1, Numbered(4))
	for i, v := range perm {
		if pat[i] != at[v] {
			t.Fatalf("%s: node %d listed first, %d listed in another order", names[v], at[v], pat[i])
		}
	}
	other, _ := Assign(names, w, 2, Numbered(4))
	same := 0
	for v := range at {
		if at[v] == other[v] {
			same++
		}
	}
	if same > len(at)/2 {
		t.Errorf("seeds 1 and 2 place %d of %d videos alike: the seed is not used", same, len(at))
	}
}

// TestRuleValues pins the rule's parts, for other tools' implementations (docs/usage.md).
func TestRuleValues(t *testing.T) {
	if got := Key(0, "a/b.mp4"); got != 0xd27fc485a5a7d709 {
		t.Errorf("Key(0, a/b.mp4) = %#x", got)
	}
	if got := Mix(1); got != 0x5692161d100b05e5 {
		t.Errorf("Mix(1) = %#x", got)
	}
	if got := Name("a\\b\nc\rd"); got != `a\\b\nc\rd` {
		t.Errorf("Name = %q", got)
	}
	if _, err := Assign([]string{"a"}, []int{1}, 0, nil); err == nil {
		t.Error("0 nodes: no error")
	}
	if _, err := Assign([]string{"a"}, []int{1}, 0, []string{"x", "x"}); err == nil {
		t.Error("a node named twice: no error")
	}
}

// BenchmarkAssign places a million videos on 8 nodes (vidfs copy --nodes at Kinetics-and-more
// scale): go test -bench Assign -benchmem ./placement/
func BenchmarkAssign(b *testing.B) {
	names, w := dataset(1_000_000, 4)
	nodes := Numbered(8)
	b.ResetTimer()
	for range b.N {
		if _, err := Assign(names, w, 0, nodes); err != nil {
			b.Fatal(err)
		}
	}
}

// TestHostLost: nodes named by host, one lost from the middle of the list: only the videos it
// held move (where numbered nodes, renumbered after it, would move most of them).
func TestHostLost(t *testing.T) {
	names, w := dataset(5000, 5)
	hosts := []string{"gpu1", "gpu10", "gpu2", "gpu3", "gpu4", "gpu5", "gpu6", "gpu7"}
	before, _ := Assign(names, w, 3, hosts)
	left := slices.Delete(slices.Clone(hosts), 3, 4) // gpu3 lost
	after, _ := Assign(names, w, 3, left)
	moved, placed, others := 0, 0, 0
	for v := range before {
		if before[v] < 0 {
			continue
		}
		placed++
		if hosts[before[v]] != left[after[v]] {
			moved++
			if before[v] != 3 {
				others++
			}
		}
	}
	if f := float64(moved) / float64(placed); f > 0.16 || others > placed/100 {
		t.Errorf("gpu3 lost of 8: %.3f of the videos moved, %d of them from other nodes; want about 1/8, from gpu3", f, others)
	}
}

// TestPinned is the rule's output on a small list with unequal weights, a video without
// samples, names that tie no key, and host names; python/vidfs.py's placement() is checked
// against the same vector (cmd/vidfs TestPlacementPython), so that the two never drift apart.
func TestPinned(t *testing.T) {
	b, err := os.ReadFile("testdata/pinned.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Names   []string
		Weights []int
		Seed    uint64
		Nodes   []string
		Want    []int
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		got, err := Assign(c.Names, c.Weights, c.Seed, c.Nodes)
		if os.Getenv("PLACEMENT_PIN") != "" { // prints the vectors to pin, once, by hand
			fmt.Printf("case %d: %v\n", i, got)
			continue
		}
		if err != nil || !slices.Equal(got, c.Want) {
			t.Errorf("case %d: Assign = %v, %v; want %v", i, got, err, c.Want)
		}
	}
}
