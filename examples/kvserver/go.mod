module github.com/kvgen/kvgen/examples/kvserver

go 1.26.0

require (
	github.com/kvgen/kvgen v0.0.0-00010101000000-000000000000
	github.com/kvgen/kvgen/examples/external/kvevents v0.0.0-00010101000000-000000000000
	github.com/prometheus/client_golang v1.25.0
	github.com/stretchr/testify v1.12.1
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dave/jennifer v1.7.1 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.72.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	github.com/rogpeppe/go-internal v1.16.0 // indirect
	github.com/vmihailenco/msgpack/v5 v5.4.1 // indirect
	github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/mod v0.43.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/tools v0.52.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
	oras.land/oras-go/v2 v2.7.0 // indirect
)

tool github.com/kvgen/kvgen/cmd/kvgen

replace github.com/kvgen/kvgen => ../..

replace github.com/kvgen/kvgen/examples/external/kvevents => ../external/kvevents
