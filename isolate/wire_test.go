package isolate

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vidfs/vidfs/decode"
	"github.com/vidfs/vidfs/internal/testvideo"
)

// fill sets every field v holds (structs, pointers, slices, maps of them) to a value of its own,
// counting from *n, so that a field a codec leaves out reads back as zero and is seen.
func fill(v reflect.Value, n *int) {
	*n++
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), n)
			}
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), n)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		fill(v.Index(0), n)
		fill(v.Index(1), n)
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, n)
		fill(e, n)
		v.SetMapIndex(k, e)
	case reflect.String:
		v.SetString(strings.Repeat("x", *n%7+1) + string(rune('a'+*n%26)))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(*n))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(*n))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(*n) + 0.5)
	}
}

// TestCodecFields: every field of every message crosses, the decode package's types whole (a
// field added to decode.Info, Output or PoolStats that the codec does not carry fails here),
// and reads back equal.
func TestCodecFields(t *testing.T) {
	n := 0
	for k, field := range map[kind]string{msgHello: "Hello", msgDecode: "Decode", msgReply: "Reply",
		msgTry: "Tries", msgProbeVideo: "ProbeVideo"} {
		m := &message{Kind: k, ID: 77}
		fill(reflect.ValueOf(m).Elem().FieldByName(field), &n)
		if k == msgReply {
			m.Reply.Stats.GPUs = nil // a helper decodes on no GPU
		}
		got, err := parse(k, m.ID, 0, m.body())
		if err != nil {
			t.Fatalf("kind %d: %v", k, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("kind %d: sent %+v, read %+v", k, m, got)
		}
	}
	var in decode.Info
	fill(reflect.ValueOf(&in).Elem(), &n)
	var e enc
	e.info(&in)
	d := dec{b: e.b}
	if got := d.info(); d.end() != nil || !reflect.DeepEqual(got, &in) {
		t.Errorf("a probe table: sent %+v, read %+v (%v)", in, got, d.err)
	}
}

// TestCheckInfo: the probe table of every test video passes the mount's checks, crossing the
// wire; tables that do not hold together are refused.
func TestCheckInfo(t *testing.T) {
	names, err := filepath.Glob(filepath.Join(testvideo.Dir(), "*"))
	if err != nil {
		t.Fatal(err)
	}
	probed := 0
	var good *decode.Info
	for _, p := range names {
		info, err := decode.Probe(p)
		if err != nil {
			continue
		}
		probed++
		var e enc
		e.info(info)
		d := dec{b: e.b}
		got := d.info()
		if err := d.end(); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if err := checkInfo(got, p); err != nil {
			t.Errorf("%s: %v", filepath.Base(p), err)
		}
		if good == nil && len(info.Keyframes) > 1 && info.Frames > 10 {
			good = info
		}
	}
	if probed < 20 || good == nil {
		t.Fatalf("%d test videos probed: the test shows little", probed)
	}
	for name, spoil := range map[string]func(in *decode.Info){
		"frames past the timestamps": func(in *decode.Info) { in.Frames = 1 << 40 },
		"negative frames":            func(in *decode.Info) { in.Frames = -1 },
		"a keyframe past the end":    func(in *decode.Info) { in.Keyframes[1].Frame = in.Frames },
		"keyframes out of order":     func(in *decode.Info) { in.Keyframes[1].Frame = in.Keyframes[0].Frame },
		"a huge picture":             func(in *decode.Info) { in.Width = 1 << 30 },
		"a brief table":              func(in *decode.Info) { in.Ends = &decode.PTSEnds{} },
		"a duration of NaN":          func(in *decode.Info) { in.Duration = math.NaN() },
		"a decode-order map too short": func(in *decode.Info) {
			in.FramePackets = make([]int32, in.Frames-1)
		},
	} {
		in := *good
		in.Keyframes = append([]decode.Keyframe(nil), good.Keyframes...)
		spoil(&in)
		if err := checkInfo(&in, good.Path); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// seeds are real messages of every kind a helper sends, for the fuzz target to start from.
func seeds(t testing.TB) []*message {
	info, err := decode.Probe(testvideo.Path("h264_bframes.avi"))
	if err != nil {
		t.Fatal(err)
	}
	frame := 12
	return []*message{
		{Kind: msgHello, Hello: &hello{Pid: os.Getpid(), UID: 65534, LandlockABI: 7, Seccomp: true}},
		{Kind: msgReply, ID: 3, Reply: &reply{Path: decode.PathCPU, Kept: []int{1, 4, 9}, CPU: time.Millisecond,
			Stats: decode.PoolStats{ClipsCPU: 3, Frames: 40}}},
		{Kind: msgReply, ID: 4, Reply: &reply{Err: &wireError{Kind: decode.ErrCorrupt.Error(), Path: "/v.mp4", Frame: &frame, Errno: 5}}},
		{Kind: msgReply, ID: 5, Reply: &reply{Marks: []int{30, 60}}},
		{Kind: msgTry, ID: 6, Tries: []tryResult{{What: "open", Err: "EPERM"}}},
		{Kind: msgReply, ID: 7, Reply: &reply{Info: info}},
	}
}

// FuzzParse: the mount's parser of what helpers send takes any bytes without panicking or
// allocating beyond their size, and what it accepts reads back the same once written again.
func FuzzParse(f *testing.F) {
	for _, m := range seeds(f) {
		f.Add(uint8(m.Kind), m.body())
	}
	f.Fuzz(func(t *testing.T, k uint8, b []byte) {
		m, err := parse(kind(k), 1, 0, b)
		if err != nil {
			return
		}
		again := m.body()
		m2, err := parse(kind(k), 1, 0, again)
		if err != nil {
			t.Fatalf("a message written again does not read: %v", err)
		}
		if !bytes.Equal(m2.body(), again) {
			t.Fatal("a message written again reads back otherwise")
		}
	})
}
