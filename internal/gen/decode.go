package gen

import (
	"errors"
	"fmt"
	"go/token"
	"go/types"
	"os"
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/tools/go/gcexportdata"
	"golang.org/x/tools/go/packages"

	"github.com/kvgen/kvgen/internal/load"
)

// kvPath is the import path of the KV connector contract's package, whose
// Factory is DefaultFactory.
const kvPath = load.RegistryPath + "/kv"

// loadedPackage is a connector package as the check stage sees it: as
// the go command listed it, and its types once decoded.
type loadedPackage struct {
	pkg   *packages.Package
	types *types.Package
	fset  *token.FileSet
	// contract is the contract in the same type universe as types, so
	// that types.Identical and types.Implements can compare them.
	contract *typedContract
	err      error

	// src is its Go files, parsed when first needed.
	src *load.SourceFiles
}

// decode reads the export data of the given packages, which loaded
// without errors, and the contract's types, from contractPkg, with them.
//
// go/packages decodes export data under one lock because its importer
// shares a single type universe. Here each worker keeps its own universe,
// seeded with package registry, so the workers need no lock and the
// decoding, which dominates once go list is done, runs on every core.
func decode(todo []*loadedPackage, contractPkg *packages.Package, contract *Contract) error {
	// Workers claim packages by index rather than receive them over a
	// channel: a hand-off per package costs a scheduler round trip, about
	// 15% of the decoding time at 400 packages.
	fset := token.NewFileSet()
	workers := min(runtime.GOMAXPROCS(0), len(todo))
	setupErrs := make([]error, workers)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			imports := make(map[string]*types.Package)
			c, err := readContractTypes(fset, imports, contractPkg, contract)
			if err != nil {
				setupErrs[w] = err
				return // the other workers take the packages; load fails anyway
			}
			for {
				i := int(next.Add(1)) - 1
				if i >= len(todo) {
					return
				}
				lp := todo[i]
				lp.types, lp.err = readExport(fset, imports, lp.pkg)
				lp.contract, lp.fset = c, fset
			}
		})
	}
	wg.Wait()
	return errors.Join(setupErrs...)
}

// readExport decodes a package's export data into imports.
func readExport(fset *token.FileSet, imports map[string]*types.Package, p *packages.Package) (*types.Package, error) {
	f, err := os.Open(p.ExportFile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The go command's -export files are still archives, which only
	// NewReader opens; Read alone will do once they are not.
	//lint:ignore SA1019 go list -export hands archives to this Go
	r, err := gcexportdata.NewReader(f) // it buffers f itself
	if err != nil {
		return nil, fmt.Errorf("reading export data of %s: %w", p.PkgPath, err)
	}
	return gcexportdata.Read(r, fset, imports, p.PkgPath)
}

// readContractTypes reads the contract's types, from its package p, into
// a worker's type universe: those of one universe cannot be compared with
// another's.
func readContractTypes(fset *token.FileSet, imports map[string]*types.Package, p *packages.Package, c *Contract) (*typedContract, error) {
	pkg, err := readExport(fset, imports, p)
	if err != nil {
		return nil, err
	}
	tc, _, problem := typeContract(pkg, *c)
	if tc == nil {
		return nil, errors.New(problem) // ReadContract reported it already
	}
	return tc, nil
}
