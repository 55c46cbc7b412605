package decode

import (
	"testing"

	"github.com/asticode/go-astiav"
)

// TestPacketPointer: packetPointer finds the AVPacket go-astiav's Packet wraps. A go-astiav whose
// Packet is laid out otherwise fails here, not in memory.
func TestPacketPointer(t *testing.T) {
	p := astiav.AllocPacket()
	defer p.Free()
	for _, v := range []int64{12345, -7, 1 << 40} {
		p.SetPts(v)
		if got := packetPts(p); got != v {
			t.Fatalf("pts %d through packetPointer, %d through go-astiav", got, v)
		}
	}
}
