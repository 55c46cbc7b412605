package evict

import "testing"

// TestVictim: members no plan wants go first, least recently used first; then the one due last,
// only if due later than after; members the store cannot drop are passed over; a due that moved
// since it was asked is asked again before its member is taken.
func TestVictim(t *testing.T) {
	due := map[int]int{1: 100, 2: 5000, 3: 300, 4: -1, 5: -1}
	p := New[string](func(tag int) int {
		if d, ok := due[tag]; ok {
			return d
		}
		return -1
	})
	for _, k := range []struct {
		key string
		tag int
	}{{"a", 1}, {"b", 2}, {"c", 3}, {"d", 4}, {"e", 5}} {
		p.Add(k.key, k.tag)
	}
	p.Touch("d") // e is now the least recently used of those not due
	victim := func(after int, skip func(string) bool) string {
		k, ok := p.Victim(after, skip)
		if !ok {
			return "none"
		}
		return k
	}
	if v := victim(NotDue, nil); v != "e" {
		t.Errorf("first victim %s, want e (not due, least recently used)", v)
	}
	p.Remove("e")
	if v := victim(NotDue, func(k string) bool { return k == "d" }); v != "none" {
		t.Errorf("with d held and only members not due to go: %s, want none", v)
	}
	if v := victim(Any, func(k string) bool { return k == "d" }); v != "b" {
		t.Errorf("with d held: %s, want b (due last)", v)
	}
	p.Remove("d")
	if v := victim(6000, nil); v != "none" {
		t.Errorf("after 6000 ms: %s, want none (b is due sooner)", v)
	}
	if v := victim(1000, nil); v != "b" {
		t.Errorf("after 1000 ms: %s, want b", v)
	}
	due[2] = 50 // b was read: due soon now; c (300) is due last
	if v := victim(Any, nil); v != "c" {
		t.Errorf("after b's due moved: %s, want c", v)
	}
	p.Remove("c")
	if p.Len() != 2 || !p.Has("a") || p.Has("c") {
		t.Errorf("%d members; a %v, c %v", p.Len(), p.Has("a"), p.Has("c"))
	}
}
