package metrics

import "github.com/prometheus/client_golang/prometheus"

// storageMetrics are the metrics of artifacts and caches.
type storageMetrics struct {
	cacheRequests *prometheus.CounterVec
	cacheBytes    prometheus.Gauge
	artifactBytes prometheus.Counter
	// lookups holds the children of cacheRequests, by result.
	lookups map[string]prometheus.Counter
}

// cacheResults are the result label values of
// kici_orch_cache_requests_total.
var cacheResults = []string{"hit", "partial", "miss"}

func newStorageMetrics() *storageMetrics {
	m := &storageMetrics{
		cacheRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kici_orch_cache_requests_total",
			Help: "Cache lookups by jobs, by result: hit (the exact key), partial (a restore key), miss.",
		}, []string{"result"}),
		cacheBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kici_orch_cache_bytes",
			Help: "Bytes of the cache entries stored, as of the last save, eviction or sweep.",
		}),
		artifactBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kici_orch_artifact_bytes_stored_total",
			Help: "Bytes of artifact bundles accepted and stored since the orchestrator started.",
		}),
		lookups: map[string]prometheus.Counter{},
	}
	for _, r := range cacheResults {
		m.lookups[r] = m.cacheRequests.WithLabelValues(r) // exposed at 0 from the start
	}
	return m
}

func (m *storageMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.cacheRequests, m.cacheBytes, m.artifactBytes}
}

// CacheLookup counts one cache lookup by result (hit, partial, miss); an
// unknown result is not counted.
func (r *Registry) CacheLookup(result string) {
	if c, ok := r.storage.lookups[result]; ok {
		c.Inc()
	}
}

// CacheBytes sets the bytes of the cache entries stored.
func (r *Registry) CacheBytes(n int64) { r.storage.cacheBytes.Set(float64(n)) }

// ArtifactStored counts the bytes of an accepted artifact bundle.
func (r *Registry) ArtifactStored(n int64) { r.storage.artifactBytes.Add(float64(n)) }
