package metrics_test

import (
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/metrics"
)

// hotPath are the recording methods called once per run, job, step, log
// chunk or webhook delivery.
var hotPath = []struct {
	name   string
	record func(r *metrics.Registry)
}{
	{"RunEnded", func(r *metrics.Registry) { r.RunEnded("success") }},
	{"JobEnded", func(r *metrics.Registry) { r.JobEnded("failure") }},
	{"StepEnded", func(r *metrics.Registry) { r.StepEnded("success") }},
	{"LogChunkReceived", func(r *metrics.Registry) { r.LogChunkReceived() }},
	{"WebhookReceived", func(r *metrics.Registry) { r.WebhookReceived("github", "push") }},
	{"WebhookReceived other", func(r *metrics.Registry) { r.WebhookReceived("github", "not-an-event") }},
	{"Delivery", func(r *metrics.Registry) { r.Delivery("processed", 1) }},
}

// TestHotPathDoesNotAllocate: the per-event recording methods resolve
// their label children ahead, so an increment allocates nothing. Not
// parallel: testing.AllocsPerRun refuses to run in a parallel test.
func TestHotPathDoesNotAllocate(t *testing.T) {
	for _, tt := range hotPath {
		t.Run(tt.name, func(t *testing.T) {
			r := metrics.New()
			tt.record(r) // a lazily resolved child is resolved here
			if got := testing.AllocsPerRun(100, func() { tt.record(r) }); got != 0 {
				t.Errorf("allocations per call: got %v, want 0", got)
			}
		})
	}
}

// TestNilRegistryRecordsNothing: a component built without metrics (a
// nil *Registry) may call the recording methods.
func TestNilRegistryRecordsNothing(t *testing.T) {
	t.Parallel()
	var r *metrics.Registry
	for _, tt := range hotPath {
		tt.record(r) // must not panic
	}
	r.JobRan(metrics.JobCleanup, time.Unix(1, 0), nil)
}

// BenchmarkHotPath measures each per-event recording method; compare
// with BenchmarkWithLabelValues, what the counters cost before.
func BenchmarkHotPath(b *testing.B) {
	for _, tt := range hotPath {
		b.Run(tt.name, func(b *testing.B) {
			r := metrics.New()
			b.ReportAllocs()
			for b.Loop() {
				tt.record(r)
			}
		})
	}
}

// BenchmarkWithLabelValues is kici's run counter as it was recorded
// before the label children were resolved ahead.
func BenchmarkWithLabelValues(b *testing.B) {
	r := metrics.New()
	b.ReportAllocs()
	for b.Loop() {
		r.RunsFinished.WithLabelValues("success").Inc()
	}
}
