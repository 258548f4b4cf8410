package metrics

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// This file holds the metrics kici exposes under the reference
// orchestrator's names (docs/metrics.md, "Reference names"), so that
// dashboards built for it read kici too. Each is recorded beside kici's
// own metric of the same event, through methods whose label children are
// resolved once in New: an increment is a map lookup and an atomic add,
// with no allocation.

// Reference label values where kici's differ: kici says "failure", the
// reference "failed".
var referenceStatus = map[string]string{
	"success":   "success",
	"failure":   "failed",
	"cancelled": "cancelled",
	"skipped":   "skipped",
}

// Webhook sources as the reference names them, by kici's webhook
// provider (internal/api): GitHub deliveries to kici's own route are the
// reference's "github-direct", generic git pushes its "generic".
var webhookSources = map[string]string{
	"github":      "github-direct",
	"github-form": "github-direct",
	"generic":     "generic",
}

// webhookEvents are the event label values of
// kici_orch_webhooks_received_total; any other X-GitHub-Event header
// (the header is sent before the signature is checked, so by anyone)
// counts as "other", keeping the series bounded.
var webhookEvents = []string{
	"push", "pull_request", "pull_request_review", "pull_request_review_comment", "pull_request_target",
	"issue_comment", "issues", "create", "delete", "release", "status", "workflow_dispatch", "workflow_run",
	"check_run", "check_suite", "ping", "installation", "installation_repositories", "fork", "star", "watch",
	"repository_dispatch", "merge_group", "deployment", "deployment_status", "other",
}

// Scheduled job names of kici_orch_job_runs_total: "cleanup" is the
// reference's name, "retention" kici's own.
const (
	JobCleanup   = "cleanup"
	JobRetention = "retention"
)

// reference holds the reference-named collectors and their resolved
// children. Its maps are written only in newReference, then only read.
type reference struct {
	executions    *prometheus.CounterVec
	steps         *prometheus.CounterVec
	webhooks      *prometheus.CounterVec
	processed     *prometheus.CounterVec
	dedupHits     prometheus.Counter
	logChunks     prometheus.Counter
	jobRuns       *prometheus.CounterVec
	jobLastOK     *prometheus.GaugeVec
	jobLastFailed *prometheus.GaugeVec
	jobFailures   *prometheus.GaugeVec

	// kici's status → the pair of counters (kici's, the reference's).
	runEnded  map[string][2]prometheus.Counter
	jobEnded  map[string]prometheus.Counter
	stepEnded map[string]prometheus.Counter
	// provider → event → counter, resolved at its first delivery (so
	// /metrics does not list two dozen events at 0).
	received map[string]map[string]*lazyCounter
	// verdict → counters (kici's, and the reference's processed result
	// when the verdict is one).
	verdicts map[string]verdictCounters
}

type verdictCounters struct {
	kici prometheus.Counter
	// matched and unmatched are the reference's result for a delivery
	// that ran trigger matching and started runs or none; nil for a
	// verdict that never reached it.
	matched, unmatched prometheus.Counter
	// dedup is set for the duplicate verdict.
	dedup bool
}

// Webhook verdicts as internal/api names them (docs/metrics.md).
var webhookVerdicts = []string{
	"processed", "duplicate", "ignored", "rejected_signature", "rejected_misconfigured", "rejected_unknown_source",
	"rejected_too_large", "rejected_delivery_id", "invalid_payload", "invalid_workflow", "failed",
}

func newReference(r *Registry) *reference {
	ref := &reference{
		executions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kici_orch_executions_total", Help: "Runs that reached a final status, by status (success, failed, cancelled); reference name of kici_orch_runs_finished_total.",
		}, []string{"status"}),
		steps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kici_orch_steps_total", Help: "Steps that reached a final status as reported by their agent, by status (success, failed, skipped, cancelled).",
		}, []string{"status"}),
		webhooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kici_orch_webhooks_received_total", Help: "Webhook deliveries received, by source (github-direct, generic) and event.",
		}, []string{"source", "event"}),
		processed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kici_orch_webhooks_processed_total", Help: "Authenticated webhook deliveries that went through trigger matching, by result (matched, skipped, error).",
		}, []string{"result"}),
		dedupHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kici_orch_dedup_hits_total", Help: "Webhook deliveries dropped as a duplicate of a delivery id seen within 24 h.",
		}),
		logChunks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kici_orch_log_chunks_received_total", Help: "Log chunks received from the agents owning their jobs (a replayed chunk counts again).",
		}),
		jobRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kici_orch_job_runs_total", Help: "Ticks of the orchestrator's scheduled jobs, by job and result (success, failure).",
		}, []string{"job", "result"}),
		jobLastOK: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kici_orch_job_last_success_timestamp_seconds", Help: "Unix time of a scheduled job's last successful tick.",
		}, []string{"job"}),
		jobLastFailed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kici_orch_job_last_failure_timestamp_seconds", Help: "Unix time of a scheduled job's last failed tick.",
		}, []string{"job"}),
		jobFailures: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kici_orch_job_consecutive_failures", Help: "Failed ticks of a scheduled job since its last successful one.",
		}, []string{"job"}),
		runEnded:  map[string][2]prometheus.Counter{},
		jobEnded:  map[string]prometheus.Counter{},
		stepEnded: map[string]prometheus.Counter{},
		received:  map[string]map[string]*lazyCounter{},
		verdicts:  map[string]verdictCounters{},
	}
	for _, s := range []string{"success", "failure", "cancelled"} {
		ref.runEnded[s] = [2]prometheus.Counter{r.RunsFinished.WithLabelValues(s), ref.executions.WithLabelValues(referenceStatus[s])}
	}
	for _, s := range []string{"success", "failure", "cancelled", "skipped"} {
		ref.jobEnded[s] = r.JobsFinished.WithLabelValues(s)
		ref.stepEnded[s] = ref.steps.WithLabelValues(referenceStatus[s])
	}
	for provider, source := range webhookSources {
		events := map[string]*lazyCounter{}
		for _, ev := range webhookEvents {
			if source == "generic" && ev != "push" && ev != "other" {
				continue // a generic delivery is always a push
			}
			events[ev] = &lazyCounter{vec: ref.webhooks, labels: [2]string{source, ev}}
		}
		ref.received[provider] = events
	}
	matched, skipped, failed := ref.processed.WithLabelValues("matched"), ref.processed.WithLabelValues("skipped"), ref.processed.WithLabelValues("error")
	for _, v := range webhookVerdicts {
		vc := verdictCounters{kici: r.WebhookDeliveries.WithLabelValues(v)}
		switch v {
		case "processed":
			vc.matched, vc.unmatched = matched, skipped
		case "ignored":
			vc.matched, vc.unmatched = skipped, skipped
		case "invalid_workflow", "failed":
			vc.matched, vc.unmatched = failed, failed
		case "duplicate":
			vc.dedup = true
		}
		ref.verdicts[v] = vc
	}
	return ref
}

// lazyCounter is a child of a two-label counter vector, resolved at its
// first increment; later ones are an atomic load and add.
type lazyCounter struct {
	vec    *prometheus.CounterVec
	labels [2]string
	c      atomic.Pointer[prometheus.Counter]
}

func (l *lazyCounter) Inc() {
	c := l.c.Load()
	if c == nil {
		// Two first increments racing both resolve the same child.
		child := l.vec.WithLabelValues(l.labels[0], l.labels[1])
		c = &child
		l.c.Store(c)
	}
	(*c).Inc()
}

func (ref *reference) collectors() []prometheus.Collector {
	return []prometheus.Collector{ref.executions, ref.steps, ref.webhooks, ref.processed, ref.dedupHits, ref.logChunks,
		ref.jobRuns, ref.jobLastOK, ref.jobLastFailed, ref.jobFailures}
}

// RunEnded counts a run that reached the final status (kici's: success,
// failure, cancelled) in kici_orch_runs_finished_total and
// kici_orch_executions_total. Like every recording method of this file,
// it records nothing on a nil r.
func (r *Registry) RunEnded(status string) {
	if r == nil {
		return
	}
	if c, ok := r.ref.runEnded[status]; ok {
		c[0].Inc()
		c[1].Inc()
		return
	}
	r.RunsFinished.WithLabelValues(status).Inc()
	r.ref.executions.WithLabelValues(status).Inc()
}

// JobEnded counts a job that reached the final status in
// kici_orch_jobs_finished_total.
func (r *Registry) JobEnded(status string) {
	if r == nil {
		return
	}
	if c, ok := r.ref.jobEnded[status]; ok {
		c.Inc()
		return
	}
	r.JobsFinished.WithLabelValues(status).Inc()
}

// StepEnded counts a step that reached the final status (kici's:
// success, failure, skipped, cancelled) in kici_orch_steps_total.
func (r *Registry) StepEnded(status string) {
	if r == nil {
		return
	}
	if c, ok := r.ref.stepEnded[status]; ok {
		c.Inc()
		return
	}
	r.ref.steps.WithLabelValues(status).Inc()
}

// WebhookReceived counts a webhook delivery as it arrives, before
// anything about it is checked, by kici's provider (github, github-form,
// generic) and event kind. A nil r records nothing.
func (r *Registry) WebhookReceived(provider, event string) {
	if r == nil {
		return
	}
	events, ok := r.ref.received[provider]
	if !ok {
		events = r.ref.received["generic"]
	}
	c, ok := events[event]
	if !ok {
		c = events["other"]
	}
	c.Inc()
}

// Delivery counts a webhook delivery's verdict, and, for one that went
// through trigger matching, its result (matched when it started runs,
// else skipped; error when it failed) and dedup hits. runs is the number
// of runs it started. A nil r records nothing.
func (r *Registry) Delivery(verdict string, runs int) {
	if r == nil {
		return
	}
	vc, ok := r.ref.verdicts[verdict]
	if !ok {
		r.WebhookDeliveries.WithLabelValues(verdict).Inc()
		return
	}
	vc.kici.Inc()
	switch {
	case vc.dedup:
		r.ref.dedupHits.Inc()
	case vc.matched == nil:
	case runs > 0:
		vc.matched.Inc()
	default:
		vc.unmatched.Inc()
	}
}

// LogChunkReceived counts a log chunk received from the agent owning its
// job.
func (r *Registry) LogChunkReceived() {
	if r != nil {
		r.ref.logChunks.Inc()
	}
}

// JobRan records one tick of the scheduled job (JobCleanup,
// JobRetention) at now: failed when err is not nil. A job's series appear
// at its first tick, both results at once (so a rate() sees the first
// failure).
func (r *Registry) JobRan(job string, now time.Time, err error) {
	if r == nil {
		return
	}
	ts := float64(now.UnixNano()) / 1e9
	ok, failed := r.ref.jobRuns.WithLabelValues(job, "success"), r.ref.jobRuns.WithLabelValues(job, "failure")
	if err != nil {
		failed.Inc()
		r.ref.jobLastFailed.WithLabelValues(job).Set(ts)
		r.ref.jobFailures.WithLabelValues(job).Inc()
		return
	}
	ok.Inc()
	r.ref.jobLastOK.WithLabelValues(job).Set(ts)
	r.ref.jobFailures.WithLabelValues(job).Set(0)
}
