// Package placement gives each video of a dataset to one node of a multi-node job, for the
// whole run: balanced by samples, a pure function of the seed, the list of videos and the
// nodes, and moving few videos when nodes come or go. vidfs copy fills a node's share by it, and
// python/vidfs.py's PlanSampler(placement="node" or "host") splits each epoch by it; the two
// implement the same rule, written out in docs/usage.md ("Many nodes") for other tools.
//
// The rule (version 1), for N nodes, each with a name (its number in decimal, "0" to "N-1", or
// its host name), taken in order of name (bytewise):
//
//  1. Each video's key is the first 8 bytes, big-endian, of SHA-256("vidfs-placement-v1" 0x00
//     SEED 0x00 NAME), where SEED is the seed in decimal and NAME the video's line in
//     .vidfs/videos.txt (Name); each node's key the same of ("vidfs-placement-v1" 0x00 "node"
//     0x00 NODENAME).
//  2. A video's score on a node is mix(video key XOR node key), mix being SplitMix64's
//     finaliser (Mix); it prefers nodes by score, highest first (ties: the earlier node).
//  3. Each video weighs its samples, or 1 (vidfs copy --weigh videos); each node may take up to
//     ceil(W * 65 / (64 N)), W being the weight of all videos.
//  4. In rounds r = 0 .. N-1, each video not placed yet proposes to its r-th preferred node, and
//     each node takes its proposers in order of key (ties: the earlier video) until the first
//     that does not fit.
//  5. Videos left after the rounds go, in order of key, each to the node holding the least
//     weight at that point (ties: the earlier node).
//
// Videos without samples are placed on no node (-1). Steps 1-2 are rendezvous hashing: a node
// added moves about the share it gains, a node lost about the share it had, whatever its place
// in the list, as long as the others keep their names. Step 3 (bounded loads) keeps the
// largest node within 1/64 of an even share where there are enough videos; the smallest is left
// to chance.
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

// MaxNodes bounds the nodes of a placement: its tables hold a row of nodes a video.
const MaxNodes = 65536

// Key is a video's key under seed: the first 8 bytes of SHA-256(Version, seed, name).
func Key(seed uint64, name string) uint64 {
	return key(keyPrefix(seed), name)
}

// NodeKey is a node's key: the first 8 bytes of SHA-256(Version, "node", name).
func NodeKey(name string) uint64 {
	return key([]byte(Version+"\x00node"), name)
}

// Numbered names n nodes by their numbers: "0" to "n-1".
func Numbered(n int) []string {
	names := make([]string, max(0, n))
	for i := range names {
		names[i] = strconv.Itoa(i)
	}
	return names
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

// Assign places each video (names[v], weighing weights[v]: its samples, or 1) on one of the
// nodes (their names: Numbered, or host names) under seed: the index in nodes of each video's
// node, or -1 for a video of weight 0. It costs O(videos x nodes x log nodes) time, and 4 bytes
// of memory a video and node.
func Assign(names []string, weights []int, seed uint64, nodeNames []string) ([]int, error) {
	nodes := len(nodeNames)
	if nodes < 1 || nodes > MaxNodes {
		return nil, fmt.Errorf("placement: %d nodes: want 1 to %d", nodes, MaxNodes)
	}
	if len(names) != len(weights) {
		return nil, fmt.Errorf("placement: %d names for %d videos", len(names), len(weights))
	}
	// The rule takes the nodes in order of name, whatever order they are given in.
	byName := make([]int, nodes) // byName[i]: the node given whose name is the i-th in order
	for i := range byName {
		byName[i] = i
	}
	slices.SortFunc(byName, func(a, b int) int { return strings.Compare(nodeNames[a], nodeNames[b]) })
	for i := 1; i < nodes; i++ {
		if nodeNames[byName[i]] == nodeNames[byName[i-1]] {
			return nil, fmt.Errorf("placement: node %q listed twice", nodeNames[byName[i]])
		}
	}
	node := make([]int, len(names))
	keys := make([]uint64, len(names))
	var order []int // the videos with samples, in order of key
	var total int64
	prefix := keyPrefix(seed)
	prefix = slices.Grow(prefix, 256) // the names hashed after it, without an allocation each
	for v, name := range names {
		node[v] = -1
		if weights[v] <= 0 {
			continue
		}
		keys[v] = key(prefix, name)
		order = append(order, v)
		total += int64(weights[v])
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
	for n, given := range byName {
		nodeMix[n] = NodeKey(nodeNames[given])
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
			if load[n]+int64(weights[v]) > limit {
				full[n] = true
				continue
			}
			node[v] = int(n)
			load[n] += int64(weights[v])
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
		load[n] += int64(weights[v])
	}
	for v, n := range node {
		if n >= 0 {
			node[v] = byName[n]
		}
	}
	return node, nil
}
