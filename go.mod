module github.com/vidfs/vidfs

go 1.26

require (
	github.com/asticode/go-astiav v0.38.0
	github.com/spf13/pflag v1.0.10
)

require github.com/asticode/go-astikit v0.42.0 // indirect
