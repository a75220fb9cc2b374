package apitext

import (
	"os"
	"testing"

	"github.com/kvgen/kvgen/internal/kvgentest"
)

// TestMain compiles the export data the API is read from with -trimpath,
// as the other packages' tests compile (kvgentest.Main).
func TestMain(m *testing.M) { os.Exit(kvgentest.Main(m).Run()) }
