package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvgen/kvgen/registry/kv"
)

// Metrics of the connector's stats. Each series has a "connector" label:
// the configured connector, or for a MultiConnector each child's label.
var (
	hitsDesc = prometheus.NewDesc("kvgen_connector_load_hits_total",
		"Layer loads that returned KV.", []string{"connector"}, nil)
	missesDesc = prometheus.NewDesc("kvgen_connector_load_misses_total",
		"Layer loads that found no KV: not stored, evicted, or failing its check.", []string{"connector"}, nil)
	loadedDesc = prometheus.NewDesc("kvgen_connector_loaded_bytes_total",
		"KV bytes loaded.", []string{"connector"}, nil)
	savedDesc = prometheus.NewDesc("kvgen_connector_saved_bytes_total",
		"KV bytes saved.", []string{"connector"}, nil)
	loadSecondsDesc = prometheus.NewDesc("kvgen_connector_load_duration_seconds",
		"Time to load a layer, hit or miss.", []string{"connector"}, nil)
	saveSecondsDesc = prometheus.NewDesc("kvgen_connector_save_duration_seconds",
		"Time to save a layer, until it is stored.", []string{"connector"}, nil)
	errorsDesc = prometheus.NewDesc("kvgen_connector_errors_total",
		"Failed transfers, by kind: load, save, corrupt (stored KV failing its check).", []string{"connector", "kind"}, nil)
)

// statsCollector reads the worker's stats at each scrape: nothing is
// counted twice and nothing is kept between scrapes. A connector that
// counts nothing exports no series.
type statsCollector struct {
	connector string
	worker    kv.Worker
}

func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{hitsDesc, missesDesc, loadedDesc, savedDesc, loadSecondsDesc, saveSecondsDesc, errorsDesc} {
		ch <- d
	}
}

func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	r, ok := c.worker.(kv.StatsReporter)
	if !ok {
		return
	}
	s := r.KVStats()
	if len(s.Children) == 0 {
		collectStats(ch, c.connector, s)
		return
	}
	for label, child := range s.Children {
		collectStats(ch, label, child.Total())
	}
}

func collectStats(ch chan<- prometheus.Metric, label string, s kv.Stats) {
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append([]string{label}, labels...)...)
	}
	counter(hitsDesc, s.Hits)
	counter(missesDesc, s.Misses)
	counter(loadedDesc, s.BytesLoaded)
	counter(savedDesc, s.BytesSaved)
	for k := range kv.NumErrorKinds {
		counter(errorsDesc, s.Errors[k], k.String())
	}
	ch <- histogram(loadSecondsDesc, s.LoadLatency, label)
	ch <- histogram(saveSecondsDesc, s.SaveLatency, label)
}

// histogram turns a kv.Histogram into Prometheus' cumulative buckets.
func histogram(d *prometheus.Desc, h kv.Histogram, label string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(h.Counts)-1)
	var cum uint64
	for i, b := range kv.LatencyBounds() {
		cum += h.Counts[i]
		buckets[b.Seconds()] = cum
	}
	return prometheus.MustNewConstHistogram(d, h.Count(), h.Sum.Seconds(), buckets, label)
}
