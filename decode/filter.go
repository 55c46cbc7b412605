package decode

import (
	"errors"
	"fmt"

	"github.com/asticode/go-astiav"
)

// converter turns decoded frames into packed RGB24 output frames with a libavfilter graph
// (rotation, crop, scale, pad, pixel format). It is built for one input frame format and one
// Output, and rebuilt when either changes.
type converter struct {
	key   converterKey
	graph *astiav.FilterGraph
	src   *astiav.BuffersrcFilterContext
	sink  *astiav.BuffersinkFilterContext
	out   *astiav.Frame
}

type converterKey struct {
	w, h     int
	pixFmt   astiav.PixelFormat
	space    astiav.ColorSpace
	rng      astiav.ColorRange
	rotation int
	mirror   bool
	output   Output
}

func keyOf(f *astiav.Frame, info *Info, o Output) converterKey {
	return converterKey{f.Width(), f.Height(), f.PixelFormat(), f.ColorSpace(), f.ColorRange(), info.Rotation, info.Mirror, o}
}

// newConverter builds the graph for frames like f of the video info describes.
func newConverter(f *astiav.Frame, info *Info, o Output) (c *converter, err error) {
	c = &converter{key: keyOf(f, info, o)}
	defer func() {
		if err != nil {
			c.free()
		}
	}()
	if c.graph = astiav.AllocFilterGraph(); c.graph == nil {
		return nil, errors.New("allocating filter graph")
	}
	c.graph.SetThreadCount(1) // parallelism comes from decoding many clips at once
	if c.src, err = c.graph.NewBuffersrcFilterContext(astiav.FindFilterByName("buffer"), "in"); err != nil {
		return nil, fmt.Errorf("creating buffer source: %w", err)
	}
	if c.sink, err = c.graph.NewBuffersinkFilterContext(astiav.FindFilterByName("buffersink"), "out"); err != nil {
		return nil, fmt.Errorf("creating buffer sink: %w", err)
	}
	p := astiav.AllocBuffersrcFilterContextParameters()
	defer p.Free()
	p.SetWidth(f.Width())
	p.SetHeight(f.Height())
	p.SetPixelFormat(f.PixelFormat())
	p.SetColorSpace(f.ColorSpace())
	p.SetColorRange(f.ColorRange())
	p.SetTimeBase(astiav.NewRational(1, 1))
	p.SetSampleAspectRatio(astiav.NewRational(1, 1))
	if err = c.src.SetParameters(p); err != nil {
		return nil, fmt.Errorf("setting buffer source parameters: %w", err)
	}
	if err = c.src.Initialize(nil); err != nil {
		return nil, fmt.Errorf("initializing buffer source: %w", err)
	}

	outputs, inputs := astiav.AllocFilterInOut(), astiav.AllocFilterInOut()
	defer outputs.Free()
	defer inputs.Free()
	outputs.SetName("in")
	outputs.SetFilterContext(c.src.FilterContext())
	inputs.SetName("out")
	inputs.SetFilterContext(c.sink.FilterContext())
	desc := filterChain(info.Rotation, info.Mirror, f.Width(), f.Height(), f.PixelFormat().String(), o)
	if err = c.graph.Parse(desc, inputs, outputs); err != nil {
		return nil, fmt.Errorf("parsing filter graph %q: %w", desc, err)
	}
	if err = c.graph.Configure(); err != nil {
		return nil, fmt.Errorf("configuring filter graph %q: %w", desc, err)
	}
	c.out = astiav.AllocFrame()
	return c, nil
}

// convert writes frame f, converted, into dst (exactly o.FrameBytes() long). f is left unreferenced,
// unless keep: then it keeps its buffers, and the graph takes references of its own.
func (c *converter) convert(f *astiav.Frame, dst []byte, keep bool) error {
	f.SetPts(0) // timestamps mean nothing to this graph; keeps buffersrc from complaining
	flags := astiav.NewBuffersrcFlags()
	if keep {
		flags = astiav.NewBuffersrcFlags(astiav.BuffersrcFlagKeepRef)
	}
	if err := c.src.AddFrame(f, flags); err != nil {
		return fmt.Errorf("filtering frame: %w", err)
	}
	if err := c.sink.GetFrame(c.out, astiav.NewBuffersinkFlags()); err != nil {
		return fmt.Errorf("getting filtered frame: %w", err)
	}
	defer c.out.Unref()
	if c.out.Width() != c.key.output.Width || c.out.Height() != c.key.output.Height || c.out.PixelFormat() != astiav.PixelFormatRgb24 {
		return fmt.Errorf("filter graph made %dx%d %s, want %dx%d rgb24", c.out.Width(), c.out.Height(),
			c.out.PixelFormat(), c.key.output.Width, c.key.output.Height)
	}
	if _, err := c.out.ImageCopyToBuffer(dst, 1); err != nil {
		return fmt.Errorf("copying filtered frame: %w", err)
	}
	return nil
}

func (c *converter) free() {
	if c.out != nil {
		c.out.Free()
	}
	if c.graph != nil {
		c.graph.Free()
	}
}
