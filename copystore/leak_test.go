package copystore

import (
	"os"
	"testing"

	"github.com/vidfs/vidfs/internal/leakcheck"
)

// TestMain fails the package's tests if goroutines they started outlive them.
func TestMain(m *testing.M) { os.Exit(leakcheck.Main(m)) }
