// Package isolate runs FFmpeg, which decodes and probes files that came from the web or a bucket,
// in sandboxed helper processes, so that a video crafted against a decoder's bug, or one that
// crashes or hangs it, costs the clips it was decoding and never the mount, which usually runs as
// root.
//
// Decoders starts the helpers (this binary, in a hidden mode: IsHelper, Main), hands each clip
// (DecodeClip) or probe (Probe) to one, and restarts one that dies. A helper's crash or hang costs
// the requests it had in flight: each is tried once more, alone, in a fresh helper, and a video
// whose request kills that one too is held for the life of the Decoders (decode.ErrCrashed).
//
// # The trust boundary
//
// What a helper can touch:
//   - the descriptors the mount hands it for each request: the video, read-only (a local file,
//     or a socket on which the mount answers reads of an object), and its windows, shared memory
//     the mount copies a clip's frames out of once the helper has answered (memory.go). It never
//     maps the cache: it can write no sample but those of the clips it holds, and no other
//     helper's;
//   - nothing else: it runs as nobody with no capability, no_new_privs, under Landlock (no file,
//     no TCP port, no abstract socket, no signal outside itself) applied before its first thread
//     (sandbox.go), and a seccomp filter on every thread (seccomp.go) that allows reading and
//     writing its descriptors, memory that is never executable, threads and no process, signals
//     and limits of itself;
//   - within limits (limits.go): its data (RLIMIT_DATA) sized from the pictures it decodes, the
//     Go runtime's threads, and oom_score_adj 1000.
//
// What the mount believes of it, and checks first (wire.go, codec.go): every message is a frame
// of bounded length whose fields are read by a parser written for hostile input (FuzzParse); a
// probe table must hold together (checkInfo: lengths, ranges, keyframes in order); frames kept
// for the training copy must be frames the Keeper asked for, in order, within the window; marks
// of unusable keyframes count only for the video of the decode they come with, and only where
// they are its keyframes (acceptMarks). A helper can still lie about its own requests: wrong
// bytes for its clips, a wrong table for the video it probes, marks that slow its video; never
// another video's, and never the mount's memory.
//
// What runs outside the sandbox, in the mount: opening the files (and, for a bucket, fetching
// the objects' bytes), the probe cache's and the layout's arithmetic on tables the helpers made,
// copying frames out of windows, and decoding on an NVIDIA GPU (NVDEC decoders are not in helpers
// yet: a mount that decodes on a GPU decodes in its own process, and says so).
package isolate
