// Package diskstore is what the two stores of decoded video on local disk share: the sample
// tier (package tier) and the training copy (package copystore). It holds the Key a store's
// files are named by, the codecs their bytes are stored with, taking a directory for one
// process, finding the files a last mount left, reading and writing at an offset, buffers kept
// for reuse, and the Writer: a queue of jobs bounded in bytes, written by one goroutine at a
// low priority, with a Close that gives up on a disk that does not answer.
//
// It knows nothing of samples or frames: what a job is and how it is written is each store's.
package diskstore

import (
	"encoding/hex"
	"errors"
	"fmt"
)

// Key names a store's file: a digest of everything that makes its bytes (a sample's, or a
// video's frames').
type Key [32]byte

// String is the key in hex, as its file is named.
func (k Key) String() string { return hex.EncodeToString(k[:]) }

// Rel is the key's file relative to its store's directory: under the directory named by its
// first byte in hex (256 of them, so that hundreds of thousands of files do not share one).
func (k Key) Rel() string {
	s := k.String()
	return s[:2] + "/" + s
}

// ParseKey reads a file's name as the key it is named by, and says whether it is one.
func ParseKey(name string) (Key, bool) {
	var k Key
	if len(name) != 2*len(k) {
		return k, false
	}
	if _, err := hex.Decode(k[:], []byte(name)); err != nil {
		return k, false
	}
	return k, true
}

// ErrDamaged marks what a read finds wrong with the bytes of a store's file: what it read is
// damaged, and is dropped (or written again). A read's other errors are the system's (EMFILE,
// EIO): they say nothing of the file, which is kept.
var ErrDamaged = errors.New("damaged entry")

// Damaged is an error of kind ErrDamaged, saying what is wrong.
func Damaged(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrDamaged, fmt.Sprintf(format, args...))
}
