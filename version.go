// Package vidfs holds the version of vidfs. It is set in one place, python/vidfs.py's
// __version__, which the Python package reports as it is and the binary embeds from here, so
// that `vidfs --version` and `vidfs.__version__` agree.
package vidfs

import (
	_ "embed"
	"regexp"
)

//go:embed python/vidfs.py
var pythonModule string

var versionLine = regexp.MustCompile(`(?m)^__version__ = "([^"]+)"$`)

// Version is vidfs's version, as python/vidfs.py's __version__ states it.
func Version() string {
	m := versionLine.FindStringSubmatch(pythonModule)
	if m == nil {
		return "unknown"
	}
	return m[1]
}
