module github.com/kvgen/kvgen/examples/scheduler

go 1.26.0

require (
	github.com/kvgen/kvgen v0.0.0-00010101000000-000000000000
	github.com/stretchr/testify v1.12.1
)

require (
	github.com/dave/jennifer v1.7.1 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	github.com/rogpeppe/go-internal v1.16.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/mod v0.43.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/tools v0.52.0 // indirect
	oras.land/oras-go/v2 v2.7.0 // indirect
)

tool github.com/kvgen/kvgen/cmd/kvgen

replace github.com/kvgen/kvgen => ../..
