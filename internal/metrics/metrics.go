// Package metrics holds kici's Prometheus collectors in one place. A
// Registry is built once in main (or a test) and handed to the components
// that record into it; nothing here is global.
//
// It carries the Go runtime and process collectors, kici's own metrics,
// and the same events again under the reference orchestrator's names
// (reference.go), all listed in docs/metrics.md. A *Registry is safe for
// concurrent use.
package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Registry is the orchestrator's metrics.
type Registry struct {
	reg *prometheus.Registry
	// RunsFinished counts runs by final status.
	RunsFinished *prometheus.CounterVec
	// JobsFinished counts jobs by final status.
	JobsFinished *prometheus.CounterVec
	// WebhookDeliveries counts webhook deliveries by verdict.
	WebhookDeliveries *prometheus.CounterVec
	// WebhookUnrecorded counts rejected webhook deliveries that were
	// counted in WebhookDeliveries but not written to the delivery log,
	// because their sender was over the sampling limit.
	WebhookUnrecorded prometheus.Counter
	// RetentionDeleted counts what retention deleted, by kind (runs,
	// audit_entries, webhook_events).
	RetentionDeleted *prometheus.CounterVec
	// ScalerSpawnFailures counts failed spawns by backend type and by
	// whether the spawn was bound to a job.
	ScalerSpawnFailures *prometheus.CounterVec
	// ScalerConfigReloads counts scaler config reloads by result
	// (attempted, success, failed).
	ScalerConfigReloads *prometheus.CounterVec
	// ScalerSpawnRefusals counts spawns a cap refused, by scaler and cap.
	ScalerSpawnRefusals *prometheus.CounterVec
	// ScalerProvisioning observes seconds from a spawn request to the
	// agent's registration, by backend type.
	ScalerProvisioning *prometheus.HistogramVec
	// QueueWaitSeconds observes seconds from a job's enqueueing to its
	// dispatch to an agent.
	QueueWaitSeconds prometheus.Histogram
	// TimeToStartSeconds observes seconds from a run's creation to its
	// first job running.
	TimeToStartSeconds prometheus.Histogram
	// JobDurationSeconds observes seconds from a job's start to its end,
	// by final status.
	JobDurationSeconds *prometheus.HistogramVec
	// ClusterLeader is 1 while this process acts as the coordinators'
	// leader (always 1 for a standalone orchestrator).
	ClusterLeader prometheus.Gauge
	// ClusterLeaderTerm is the term of the leader lease this process
	// holds, 0 while it does not lead (and on a standalone orchestrator).
	ClusterLeaderTerm prometheus.Gauge
	// ref holds the metrics under the reference orchestrator's names.
	ref *reference
	// storage holds the metrics of artifacts and caches.
	storage *storageMetrics
}

// New returns a registry with kici's collectors and the Go runtime and
// process collectors registered.
func New() *Registry {
	r := &Registry{
		reg: prometheus.NewRegistry(),
		RunsFinished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kici_orch_runs_finished_total", Help: "Runs that reached a final status, by status.",
		}, []string{"status"}),
		JobsFinished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kici_orch_jobs_finished_total", Help: "Jobs that reached a final status, by status.",
		}, []string{"status"}),
		WebhookDeliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kici_orch_webhook_deliveries_total", Help: "Webhook deliveries received, by verdict.",
		}, []string{"verdict"}),
		WebhookUnrecorded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kici_orch_webhook_deliveries_unrecorded_total",
			Help: "Rejected webhook deliveries not written to the delivery log, their sender being over the sampling limit.",
		}),
		RetentionDeleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kici_orch_retention_deleted_total", Help: "Rows deleted by retention, by kind (runs, audit_entries, webhook_events).",
		}, []string{"kind"}),
		ScalerSpawnFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kici_orch_scaler_spawn_failures_total", Help: "Failed agent spawns, by backend type and whether the spawn was bound to a job.",
		}, []string{"backend", "bound"}),
		ScalerConfigReloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kici_orch_scaler_config_reloads_total", Help: "Scaler configuration reloads, by result (attempted, success, failed).",
		}, []string{"result"}),
		ScalerSpawnRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kici_orch_scaler_spawn_refusals_total", Help: "Spawns refused by a capacity cap, by scaler and cap (global, scaler).",
		}, []string{"scaler", "cap"}),
		ScalerProvisioning: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kici_orch_scaler_provisioning_seconds",
			Help:    "Seconds from a spawn request to the agent's registration, by backend type.",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"backend"}),
		QueueWaitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kici_orch_queue_wait_seconds",
			Help:    "Seconds a job waited in the dispatch queue, from its queue row's enqueueing to its dispatch to an agent.",
			Buckets: []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
		}),
		TimeToStartSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kici_orch_time_to_start_seconds",
			Help:    "Seconds from a run's creation (its triggering event accepted) to its first job running on an agent.",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
		}),
		JobDurationSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kici_orch_job_duration_seconds",
			Help:    "Seconds from a job's start (running) to its end, by final status.",
			Buckets: []float64{0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200},
		}, []string{"status"}),
		ClusterLeader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kici_orch_cluster_leader", Help: "1 while this orchestrator runs the singleton duties (the coordinators' leader, or a standalone orchestrator), else 0.",
		}),
		ClusterLeaderTerm: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kici_orch_cluster_leader_term", Help: "Term of the leader lease this coordinator holds; 0 while it does not lead.",
		}),
	}
	r.ref = newReference(r)
	r.reg.MustRegister(r.ref.collectors()...)
	r.storage = newStorageMetrics()
	r.reg.MustRegister(r.storage.collectors()...)
	for _, kind := range []string{"runs", "audit_entries", "webhook_events"} {
		r.RetentionDeleted.WithLabelValues(kind) // exposed at 0 from the start, so a rate() sees the first deletion
	}
	r.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		r.RunsFinished, r.JobsFinished, r.WebhookDeliveries, r.WebhookUnrecorded, r.RetentionDeleted, r.ScalerSpawnFailures, r.ScalerConfigReloads,
		r.ScalerSpawnRefusals, r.ScalerProvisioning, r.QueueWaitSeconds, r.TimeToStartSeconds, r.JobDurationSeconds, r.ClusterLeader, r.ClusterLeaderTerm)
	return r
}

// QueueWait records how long a job waited in the queue before dispatch.
func (r *Registry) QueueWait(d time.Duration) { r.QueueWaitSeconds.Observe(d.Seconds()) }

// TimeToStart records how long a run took from creation to its first job
// running.
func (r *Registry) TimeToStart(d time.Duration) { r.TimeToStartSeconds.Observe(d.Seconds()) }

// JobDuration records how long a job ran, by final status.
func (r *Registry) JobDuration(status string, d time.Duration) {
	r.JobDurationSeconds.WithLabelValues(status).Observe(d.Seconds())
}

// Handler serves the metrics in the Prometheus text format. A collector
// that fails (the queue gauges, when the database cannot be read) leaves
// out its own series only: every other series is still served, so one
// database hiccup does not mark the whole target down.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}
