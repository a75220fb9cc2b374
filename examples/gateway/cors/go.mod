module github.com/kvgen/kvgen/examples/gateway/cors

go 1.26.0
