package fs

import (
	"context"
	"path"
	"sort"
	"strconv"
	"strings"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/vidfs/vidfs/order"
)

// Inode numbers: fixed ones for the top-level files, and ranges for the samples/ tree, so that
// a file keeps its number however often the kernel forgets and looks it up again.
const (
	inoSampleFiles = 1 << 40 // + 2*sample (+1 for .npy)
	inoVideoDirs   = 1 << 41 // + video
	inoPlainDirs   = 1 << 42 // + folder number
)

// frozen is what every node of the tree embeds: an inode that refuses every change with EROFS.
// It must say so: go-fuse lets the kernel's unlink and rmdir of a child succeed, and drops the
// child from the tree, when its parent does not answer them. The plan files override what they
// accept.
type frozen struct{ gofs.Inode }

func (*frozen) Unlink(context.Context, string) syscall.Errno { return syscall.EROFS }
func (*frozen) Rmdir(context.Context, string) syscall.Errno  { return syscall.EROFS }
func (*frozen) Rename(context.Context, string, gofs.InodeEmbedder, string, uint32) syscall.Errno {
	return syscall.EROFS
}
func (*frozen) Link(context.Context, gofs.InodeEmbedder, string, *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
func (*frozen) Symlink(context.Context, string, string, *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
func (*frozen) Mknod(context.Context, string, uint32, uint32, *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
func (*frozen) Mkdir(context.Context, string, uint32, *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
func (*frozen) Create(context.Context, string, uint32, uint32, *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EROFS
}
func (*frozen) Setattr(context.Context, gofs.FileHandle, *fuse.SetAttrIn, *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}
func (*frozen) Setxattr(context.Context, string, []byte, uint32) syscall.Errno { return syscall.EROFS }
func (*frozen) Removexattr(context.Context, string) syscall.Errno              { return syscall.EROFS }

// refuseWrites refuses opens for writing with EROFS.
func refuseWrites(flags uint32) syscall.Errno {
	if flags&(syscall.O_WRONLY|syscall.O_RDWR|syscall.O_TRUNC|syscall.O_APPEND) != 0 {
		return syscall.EROFS
	}
	return 0
}

// attr fills in a's mode, size and link count, and its times: the mount's start, when the tree
// was made. (A link count of 0 would tell the kernel the entry was deleted.)
func (f *FS) attr(a *fuse.Attr, mode uint32, size uint64) {
	a.Mode, a.Size, a.Nlink = mode, size, 1
	a.Blocks = (size + 511) / 512
	t := f.start
	a.SetTimes(&t, &t, &t)
}

// node is an entry of the tree with fixed attributes: a mode, and no size to speak of
// (directories, and control files whose contents are made when they are opened).
type node struct {
	frozen
	f    *FS
	mode uint32
}

func (n *node) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.f.attr(&out.Attr, n.mode, 0)
	return 0
}

// dirMode is the mode of every directory.
const dirMode = syscall.S_IFDIR | 0o555

func dirNode(f *FS) node { return node{f: f, mode: dirMode} }

// root is the mount's top directory.
type root struct{ node }

func (r *root) OnAdd(ctx context.Context) {
	f, lay := r.f, r.f.lay
	add := func(parent *gofs.Inode, name string, node gofs.InodeEmbedder, mode uint32, ino uint64) *gofs.Inode {
		ch := parent.NewPersistentInode(ctx, node, gofs.StableAttr{Mode: mode, Ino: ino})
		parent.AddChild(name, ch, false)
		return ch
	}
	add(&r.Inode, "clips.npy", &tensorFile{f: f, hdr: lay.NpyHeader(), first: 0, count: lay.Len()}, syscall.S_IFREG, 2)
	add(&r.Inode, "clips.raw", &tensorFile{f: f, first: 0, count: lay.Len()}, syscall.S_IFREG, 3)
	add(&r.Inode, "index.csv", &genFile{f: f, name: "index.csv", gen: newIndexCSV(lay)}, syscall.S_IFREG, 4)
	add(&r.Inode, "classes.txt", &genFile{f: f, name: "classes.txt", gen: fixedBytes(strings.Join(lay.Classes, "\n") + "\n")}, syscall.S_IFREG, 5)
	add(&r.Inode, "samples", &samplesDir{node: dirNode(f), path: ""}, syscall.S_IFDIR, 6)
	ctl := add(&r.Inode, ".vidfs", &node{f: f, mode: dirMode}, syscall.S_IFDIR, 7)
	add(ctl, "order", &planFile{node{f: f, mode: planFileMode}, order.DefaultPlan}, syscall.S_IFREG, 8)
	add(ctl, "order.npy", &planFile{node{f: f, mode: planFileMode}, order.DefaultPlan}, syscall.S_IFREG, 9)
	add(ctl, "plans", &plansDir{node{f: f, mode: syscall.S_IFDIR | 0o755}}, syscall.S_IFDIR, 12)
	add(ctl, "stats", &snapshotFile{node{f: f, mode: syscall.S_IFREG | 0o444}, func() []byte { f.emptyClosedPlans(); return jsonBytes(f.Stats()) }}, syscall.S_IFREG, 10)
	add(ctl, "failed", &snapshotFile{node{f: f, mode: syscall.S_IFREG | 0o444}, f.failedCSV}, syscall.S_IFREG, 13)
	add(ctl, "layout.json", &genFile{f: f, name: ".vidfs/layout.json", gen: fixedBytes(jsonBytes(f.dataset()))}, syscall.S_IFREG, 11)
	add(ctl, "labels.npy", &genFile{f: f, name: ".vidfs/labels.npy", gen: labelsNpy(lay)}, syscall.S_IFREG, 20)
	add(ctl, "videos.npy", &genFile{f: f, name: ".vidfs/videos.npy", gen: videosNpy(lay)}, syscall.S_IFREG, 21)
	add(ctl, "videos.txt", &genFile{f: f, name: ".vidfs/videos.txt", gen: &videosTxt{lay: lay}}, syscall.S_IFREG, 23)
	if f.load.HasCopy() {
		add(ctl, "fill", &requestFile{node{f: f, mode: syscall.S_IFREG | 0o200}, f.fillRequest}, syscall.S_IFREG, 22)
	}
	// Written by PlanSampler(epochs=...) in any mount: a mount without a copy takes it and ignores it.
	add(ctl, "epochs", &requestFile{node{f: f, mode: syscall.S_IFREG | 0o200}, f.epochsRequest}, syscall.S_IFREG, 24)
}

// samplesDir is samples/<path>: folders of the source and the folders of its videos.
type samplesDir struct {
	node
	path string
}

func (d *samplesDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	entries, _ := d.f.lay.Dir(d.path)
	i := sort.Search(len(entries), func(i int) bool { return entries[i].Name >= name })
	if i == len(entries) || entries[i].Name != name {
		return nil, syscall.ENOENT
	}
	p := path.Join(d.path, name)
	d.f.attr(&out.Attr, dirMode, 0)
	if v := entries[i].Video; v >= 0 {
		return d.NewInode(ctx, &videoDir{node: dirNode(d.f), video: v}, gofs.StableAttr{Mode: syscall.S_IFDIR, Ino: inoVideoDirs + uint64(v)}), 0
	}
	return d.NewInode(ctx, &samplesDir{node: dirNode(d.f), path: p}, gofs.StableAttr{Mode: syscall.S_IFDIR, Ino: inoPlainDirs + uint64(d.f.dirNumber[p])}), 0
}

func (d *samplesDir) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	entries, _ := d.f.lay.Dir(d.path)
	list := make([]fuse.DirEntry, len(entries))
	for i, e := range entries {
		list[i] = fuse.DirEntry{Name: e.Name, Mode: syscall.S_IFDIR}
	}
	return gofs.NewListDirStream(list), 0
}

// videoDir is samples/<video path>/: its samples as <k>.raw and <k>.npy.
type videoDir struct {
	node
	video int
}

func (d *videoDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	sample, npy, ok := d.f.lay.ParseSampleFile(d.video, name)
	if !ok {
		return nil, syscall.ENOENT
	}
	t := &tensorFile{f: d.f, first: sample, count: 1}
	ino := inoSampleFiles + 2*uint64(sample)
	if npy {
		t.hdr = d.f.lay.Spec.NpyHeader(64)
		ino++
	}
	t.attr(&out.Attr)
	return d.NewInode(ctx, t, gofs.StableAttr{Mode: syscall.S_IFREG, Ino: ino}), 0
}

func (d *videoDir) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	first, end := d.f.lay.VideoSamples(d.video)
	list := make([]fuse.DirEntry, 0, 2*(end-first))
	for k := range end - first {
		list = append(list, fuse.DirEntry{Name: strconv.Itoa(k) + ".npy", Mode: syscall.S_IFREG},
			fuse.DirEntry{Name: strconv.Itoa(k) + ".raw", Mode: syscall.S_IFREG})
	}
	return gofs.NewListDirStream(list), 0
}
