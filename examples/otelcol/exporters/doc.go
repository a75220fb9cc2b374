// Package exporters is the collector's exporters, linked by kvgen from
// exporters.yaml.
package exporters
