module github.com/kvgen/kvgen/examples/external/kvevents

go 1.26.0

replace github.com/kvgen/kvgen => ../../..

require (
	github.com/kvgen/kvgen v0.0.0-00010101000000-000000000000
	github.com/vmihailenco/msgpack/v5 v5.4.1
)

require github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect
