package pipeline_test

import (
	"os"
	"testing"

	"github.com/kvgen/kvgen/internal/kvgentest"
)

// TestMain compiles what the tests' go commands compile with -trimpath,
// as the other packages' tests do (kvgentest.Main).
func TestMain(m *testing.M) { os.Exit(kvgentest.Main(m).Run()) }
