// Package receivers is the collector's receivers, linked by kvgen from
// receivers.yaml.
package receivers

//go:generate go tool kvgen -manifest ../receivers.yaml
