package vidfs

import (
	"regexp"
	"testing"
)

func TestVersion(t *testing.T) {
	if v := Version(); !regexp.MustCompile(`^\d+\.\d+\.\d+([.+-]\w+)*$`).MatchString(v) {
		t.Fatalf("Version() = %q: python/vidfs.py has no __version__ = \"X.Y.Z\" line", v)
	}
}
