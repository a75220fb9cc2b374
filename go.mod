module github.com/kvgen/kvgen

go 1.26.0

require (
	github.com/dave/jennifer v1.7.1
	github.com/opencontainers/go-digest v1.0.0
	github.com/opencontainers/image-spec v1.1.1
	github.com/rogpeppe/go-internal v1.16.0
	github.com/stretchr/testify v1.12.1
	go.yaml.in/yaml/v3 v3.0.6
	golang.org/x/mod v0.43.0
	golang.org/x/sync v0.24.0
	golang.org/x/tools v0.52.0
	oras.land/oras-go/v2 v2.7.0
)

require (
	github.com/google/go-cmp v0.7.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)

tool github.com/kvgen/kvgen/cmd/kvgen
