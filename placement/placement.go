// Package placement gives each video of a dataset to one node of a multi-node job, for the
// whole run: balanced by samples, a pure function of the seed, the list of videos and the node
// count, and moving few videos when the node count changes. vidfs copy fills a node's share by
// it, and python/vidfs.py's PlanSampler(placement="node") splits each epoch by it; the two
// implement the same rule, written out in docs/usage.md ("Many nodes") for other tools.
//
// The rule (version 1), for N nodes:
//
//  1. Each video's key is the first 8 bytes, big-endian, of SHA-256("vidfs-placement-v1" 0x00
//     SEED 0x00 NAME), where SEED is the seed in decimal and NAME the video's line in
//     .vidfs/videos.txt (Name).
//  2. Its score on node n (0 <= n < N) is mix(key XOR mix(n+1)), mix being SplitMix64's
//     finaliser (Mix); it prefers nodes by score, highest first (ties: the lower node).
//  3. Each node may take up to ceil(W * 65 / (64 N)) samples, W being the samples of all videos.
//  4. In rounds r = 0 .. N-1, each video not placed yet proposes to its r-th preferred node, and
//     each node takes its proposers in order of key (ties: the earlier video) for as long as
//     their samples fit.
//  5. Videos left after the rounds go, in order of key, each to the node with the fewest
//     samples at that point (ties: the lower node).
//
// Videos without samples are placed on no node (-1). Steps 1-2 are rendezvous hashing, so a
// node added or lost moves about the share it gains or had; step 3 (bounded loads) keeps the
// nodes within 1/64 of each other where there are enough videos.
package placement

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Version names the rule in a key's hash: a new rule takes a new version.
const Version = "vidfs-placement-v1"

// Name is a video's path as one line of .vidfs/videos.txt, which is what the rule hashes: a
// backslash as \\, a newline as \n and a carriage return as \r; every other byte as it is.
func Name(path string) string {
	if !strings.ContainsAny(path, "\\\n\r") {
		return path
	}
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`, "\r", `\r`).Replace(path)
}

// Key is a video's key under seed: the first 8 bytes of SHA-256(Version, seed, name).
func Key(seed uint64, name string) uint64 {
	return key(keyPrefix(seed), name)
}

// keyPrefix is what a key hashes before the name.
func keyPrefix(seed uint64) []byte {
	return strconv.AppendUint([]byte(Version+"\x00"), seed, 10)
}

// key hashes prefix, a zero byte and name, in buf's room (prefix is left as it is).
func key(prefix []byte, name string) uint64 {
	buf := append(append(prefix, 0), name...)
	sum := sha256.Sum256(buf)
	return binary.BigEndian.Uint64(sum[:8])
}

// Mix is SplitMix64's finaliser, the rule's score mixer.
func Mix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Assign places each video (names[v], with samples[v] samples) on a node of nodes under seed:
// the node of each video, or -1 for a video without samples. It costs O(videos x nodes) time
// and memory.
func Assign(names []string, samples []int, seed uint64, nodes int) ([]int, error) {
	if nodes < 1 {
		return nil, fmt.Errorf("placement: %d nodes: want at least 1", nodes)
	}
	if len(names) != len(samples) {
		return nil, fmt.Errorf("placement: %d names for %d videos", len(names), len(samples))
	}
	node := make([]int, len(names))
	keys := make([]uint64, len(names))
	var order []int // the videos with samples, in order of key
	var total int64
	prefix := keyPrefix(seed)
	prefix = slices.Grow(prefix, 256) // the names hashed after it, without an allocation each
	for v, name := range names {
		node[v] = -1
		if samples[v] <= 0 {
			continue
		}
		keys[v] = key(prefix, name)
		order = append(order, v)
		total += int64(samples[v])
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case keys[a] < keys[b]:
			return -1
		case keys[a] > keys[b]:
			return 1
		}
		return 0
	})
	nodeMix := make([]uint64, nodes)
	for n := range nodeMix {
		nodeMix[n] = Mix(uint64(n) + 1)
	}
	// pref[i*nodes+r] is the r-th preferred node of order[i].
	pref := make([]int32, len(order)*nodes)
	score := make([]uint64, nodes)
	for i, v := range order {
		p := pref[i*nodes : (i+1)*nodes]
		for n := range p {
			p[n] = int32(n)
			score[n] = Mix(keys[v] ^ nodeMix[n])
		}
		slices.SortStableFunc(p, func(a, b int32) int {
			switch {
			case score[a] > score[b]:
				return -1
			case score[a] < score[b]:
				return 1
			}
			return 0
		})
	}
	limit := (total*65 + int64(64*nodes) - 1) / int64(64*nodes)
	load := make([]int64, nodes)
	full := make([]bool, nodes) // a node stops taking in a round at the first proposer that does not fit
	for r := 0; r < nodes; r++ {
		clear(full)
		for i, v := range order {
			if node[v] >= 0 {
				continue
			}
			n := pref[i*nodes+r]
			if full[n] {
				continue
			}
			if load[n]+int64(samples[v]) > limit {
				full[n] = true
				continue
			}
			node[v] = int(n)
			load[n] += int64(samples[v])
		}
	}
	for _, v := range order {
		if node[v] >= 0 {
			continue
		}
		n := 0
		for m := range load {
			if load[m] < load[n] {
				n = m
			}
		}
		node[v] = n
		load[n] += int64(samples[v])
	}
	return node, nil
}
