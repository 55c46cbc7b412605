package fs

import gofs "github.com/hanwen/go-fuse/v2/fs"

// What each node and file handle answers. go-fuse finds a node's methods by interface, and a
// method whose signature is off is silently never called; these make the compiler check them.
var (
	_ gofs.NodeUnlinker      = (*frozen)(nil)
	_ gofs.NodeRmdirer       = (*frozen)(nil)
	_ gofs.NodeRenamer       = (*frozen)(nil)
	_ gofs.NodeLinker        = (*frozen)(nil)
	_ gofs.NodeSymlinker     = (*frozen)(nil)
	_ gofs.NodeMknoder       = (*frozen)(nil)
	_ gofs.NodeMkdirer       = (*frozen)(nil)
	_ gofs.NodeCreater       = (*frozen)(nil)
	_ gofs.NodeSetattrer     = (*frozen)(nil)
	_ gofs.NodeSetxattrer    = (*frozen)(nil)
	_ gofs.NodeRemovexattrer = (*frozen)(nil)
	_ gofs.NodeGetattrer     = (*node)(nil)
	_ gofs.NodeOnAdder       = (*root)(nil)
	_ gofs.NodeLookuper      = (*samplesDir)(nil)
	_ gofs.NodeReaddirer     = (*samplesDir)(nil)
	_ gofs.NodeLookuper      = (*videoDir)(nil)
	_ gofs.NodeReaddirer     = (*videoDir)(nil)
	_ gofs.NodeGetattrer     = (*tensorFile)(nil)
	_ gofs.NodeOpener        = (*tensorFile)(nil)
	_ gofs.NodeReader        = (*tensorFile)(nil)
	_ gofs.NodeGetattrer     = (*staticFile)(nil)
	_ gofs.NodeOpener        = (*staticFile)(nil)
	_ gofs.NodeReader        = (*staticFile)(nil)
	_ gofs.FileReader        = (*bytesHandle)(nil)
	_ gofs.NodeSetattrer     = (*orderFile)(nil)
	_ gofs.NodeOpener        = (*orderFile)(nil)
	_ gofs.NodeOpener        = (*statsFile)(nil)
	_ gofs.FileWriter        = (*orderWriter)(nil)
	_ gofs.FileFlusher       = (*orderWriter)(nil)
	_ gofs.FileReader        = (*orderWriter)(nil)
	_ gofs.FileReleaser      = (*orderWriter)(nil)
)
