module github.com/vidfs/vidfs

go 1.26

require (
	github.com/asticode/go-astiav v0.38.0
	github.com/hanwen/go-fuse/v2 v2.12.1
	github.com/hashicorp/golang-lru/v2 v2.0.7
	github.com/spf13/pflag v1.0.10
)

require (
	github.com/asticode/go-astikit v0.42.0 // indirect
	golang.org/x/sys v0.28.0 // indirect
)
