package main

// copyKeepFree is what the training copy leaves free on its filesystem by default (no
// --cache-disk), of one of size bytes: a tenth of it, at least 1 GiB (at most all of it). The
// copy grows into the rest, and gives room back as other files take it. A fixed cap (JuiceFS's
// 100 GiB) holds a few per cent of a video dataset's copy (Kinetics-400's is 1.2-5.4 TB at 224x224,
// 15 fps); gcsfuse and rclone bound theirs by nothing by default, and fill the disk. JuiceFS keeps
// a tenth of the disk free beside its cap (free-space-ratio 0.1): so does the copy, without the cap.
func copyKeepFree(size int64) int64 { return min(size, max(size/10, 1<<30)) }
