package link

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"path"
	"strings"
)

// nestedModule finds the module nested inside outer, a module go.mod requires,
// that provides the package importPath at version ("" for the latest),
// as go get PKG@VERSION tries module paths, the longest first. It never
// answers outer itself: a package that outer's required version lacks is
// not looked for in another version of outer, which would move outer
// behind the manifest's back. It returns "" and no error when no nested
// module has the package; an error when the go command could not look
// (GOPROXY=off, say).
//
// Whole ecosystems ship plugins so (the OpenTelemetry Collector's
// receivers, the AWS SDK's services): a host that imports the outer
// module's package requires it, and the plugin's package lies under its
// path.
func nestedModule(ctx context.Context, dir string, env []string, importPath, outer, version string) (mod, modVersion string, err error) {
	if version == "" {
		version = "latest"
	}
	args := []string{"list", "-m", "-e", "-json", "-mod=readonly"}
	for p := importPath; strings.HasPrefix(p, outer+"/"); p = path.Dir(p) {
		args = append(args, p+"@"+version)
	}
	if len(args) == 5 {
		return "", "", nil
	}
	out, err := goCmd(ctx, dir, env, args...)
	if err != nil {
		return "", "", err
	}
	dec := json.NewDecoder(strings.NewReader(out))
	var lookup error
	for {
		var m struct {
			Path, Version string
			Error         *struct{ Err string }
		}
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return "", "", lookup
		} else if err != nil {
			return "", "", err
		}
		switch {
		case m.Error == nil:
			// The longest path comes first.
			return m.Path, m.Version, nil
		case lookup == nil && !notFound(m.Error.Err):
			lookup = errors.New(m.Error.Err)
		}
	}
}

// notFound reports whether the go command's words say a module version
// does not exist, rather than that it could not look.
func notFound(msg string) bool {
	for _, s := range []string{"not found", "no matching versions", "unknown revision", "invalid version"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
