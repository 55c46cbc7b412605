// Package decode turns videos into exact frames with FFmpeg (through go-astiav): it probes a
// video once, and then decodes any clip of it, frame for frame, into memory the caller owns.
//
// Probing. Probe (or ProbeFrom, for a video read through a Source, such as an object in a
// bucket) reads a video's container and returns its Info: the probe table of its frames,
// keyframes and timestamps. Frame k is the k-th frame FFmpeg's decoder puts out for the video
// stream, in presentation order (what `ffmpeg -fps_mode passthrough` writes and PyAV
// enumerates), and Info.Frames counts exactly those. Everything a later decode needs to find
// frame i is in the Info, so it is computed once and may be stored (a mount's probe cache).
//
// Decoding clips. A Clip is T frames Stride apart from Start, counted in the video's own frames
// or, with FPS set, at a rate of the caller's. Decoding a clip seeks to a keyframe before it and
// decodes on, so that the frames given are exactly the clip's indices in presentation order,
// whatever the codec's reordering; a damaged keyframe or region is met by starting from an
// earlier keyframe. Every frame is brought to one Output: Height x Width RGB24, upright
// (display rotation applied), fitted by cropping, stretching or padding (Resize); Output.Fast
// allows shortcuts that are not bit-exact. Output.FrameBytes is the size of one frame, and a
// clip's bytes are its frames one after another. OutputVersion changes whenever the bytes for
// the same request change, for stores of decoded samples.
//
// CPU and NVDEC. A Pool decodes clips for concurrent callers (PoolOptions.Concurrency at once),
// each on the caller's thread, keeping decoders open between clips so that the next clip of a
// video decodes on without a seek. With HWAccel set it decodes on NVIDIA GPUs (NVDEC) where the
// codec allows, within GPUDecoders decoders a GPU, and on the CPU otherwise; a video NVDEC
// fails on is decoded on the CPU from then on. Result.Path says where a clip's frames were
// decoded, since NVDEC's frames may differ slightly from the CPU's. The function DecodeClip
// decodes one clip on the CPU with a decoder of its own, as a reference.
//
// Keepers. A Clip's Keeper is given the frames the decode passes through on its way to the
// clip's own that it wants (a training copy keeps them), and is told to drop those that damage
// found later may have spoilt. KeepSpec is the rule such a store keeps them by, and FrameKeeper
// a Keeper that follows it, in this process or in a sandboxed decoder.
//
// Errors. Every error is an *Error for one video file (and a frame where there is one) whose
// Kind is one of the Err* values: test them with errors.Is. Permanent tells the failures a video
// proves about itself (not a video, damaged data, too few frames), which may be remembered, from
// those of the way to it (I/O, a changed file, cancellation, an internal failure, a crashed
// sandboxed decoder), which must not be.
//
// The package decodes in the process that calls it. Package isolate runs the same decodes in
// sandboxed helper processes behind the same Clip, Output and Keeper.
package decode
