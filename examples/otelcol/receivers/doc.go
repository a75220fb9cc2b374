// Package receivers is the collector's receivers, linked by kvgen from
// receivers.yaml.
package receivers
