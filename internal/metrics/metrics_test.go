package metrics_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kici-dev/kici/internal/metrics"
)

// sample is one exposed series of a scrape.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// key is the series as name{label="value",...}, labels sorted by name.
func (s sample) key() string {
	if len(s.labels) == 0 {
		return s.name
	}
	names := make([]string, 0, len(s.labels))
	for n := range s.labels {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s=%q", n, s.labels[n]))
	}
	return s.name + "{" + strings.Join(parts, ",") + "}"
}

// scrapeResult is one GET of the metrics handler, parsed from the
// Prometheus text format.
type scrapeResult struct {
	status      int
	contentType string
	body        string
	types       map[string]string // family name -> type, from # TYPE lines
	samples     []sample
}

// family returns the samples of the family name: for a histogram, its
// _bucket, _sum and _count series.
func (s scrapeResult) family(name string) []sample {
	var out []sample
	for _, sm := range s.samples {
		if familyOf(sm.name, s.types) == name {
			out = append(out, sm)
		}
	}
	return out
}

// values returns the samples of the given families, by key.
func (s scrapeResult) values(families ...string) map[string]float64 {
	out := map[string]float64{}
	for _, f := range families {
		for _, sm := range s.family(f) {
			out[sm.key()] = sm.value
		}
	}
	return out
}

// pick returns the scraped values of just the keys of want, so a diff
// shows the missing and differing ones.
func (s scrapeResult) pick(want map[string]float64) map[string]float64 {
	all := map[string]float64{}
	for _, sm := range s.samples {
		all[sm.key()] = sm.value
	}
	out := map[string]float64{}
	for k := range want {
		if v, ok := all[k]; ok {
			out[k] = v
		}
	}
	return out
}

// familyOf maps a series name to its family: a histogram's _bucket,
// _sum and _count belong to the histogram.
func familyOf(series string, types map[string]string) string {
	if _, ok := types[series]; ok {
		return series
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(series, suffix); ok {
			if t := types[base]; t == "histogram" || t == "summary" {
				return base
			}
		}
	}
	return series
}

// serve starts a real HTTP server on the registry's handler.
func serve(t *testing.T, r *metrics.Registry) string {
	t.Helper()
	srv := httptest.NewServer(r.Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}

// scrape GETs url and parses the response. A non-200 answer is returned
// unparsed, for the caller to assert on.
func scrape(t *testing.T, url string) scrapeResult {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	res := scrapeResult{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), body: string(body), types: map[string]string{}}
	if resp.StatusCode != http.StatusOK {
		return res
	}
	sc := bufio.NewScanner(strings.NewReader(res.body))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(rest, " ")
			res.types[name] = typ
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		sm, err := parseSample(line)
		if err != nil {
			t.Fatalf("scrape line %q: %v", line, err)
		}
		res.samples = append(res.samples, sm)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return res
}

// parseSample parses one sample line of the text format:
// name{label="value",...} value [timestamp].
func parseSample(line string) (sample, error) {
	sm := sample{labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i <= 0 {
		return sm, errors.New("no metric name")
	}
	sm.name = line[:i]
	rest := line[i:]
	if rest[0] == '{' {
		rest = rest[1:]
		for {
			rest = strings.TrimLeft(rest, " ,")
			if rest == "" {
				return sm, errors.New("unterminated labels")
			}
			if rest[0] == '}' {
				rest = rest[1:]
				break
			}
			eq := strings.Index(rest, "=")
			if eq <= 0 || len(rest) < eq+2 || rest[eq+1] != '"' {
				return sm, fmt.Errorf("bad label in %q", rest)
			}
			name := rest[:eq]
			rest = rest[eq+2:]
			var val strings.Builder
			closed := false
			for j := 0; j < len(rest); j++ {
				c := rest[j]
				if c == '\\' && j+1 < len(rest) {
					j++
					switch rest[j] {
					case 'n':
						val.WriteByte('\n')
					default:
						val.WriteByte(rest[j])
					}
					continue
				}
				if c == '"' {
					rest = rest[j+1:]
					closed = true
					break
				}
				val.WriteByte(c)
			}
			if !closed {
				return sm, fmt.Errorf("unterminated value of label %s", name)
			}
			sm.labels[name] = val.String()
		}
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 || len(fields) > 2 {
		return sm, fmt.Errorf("bad value part %q", rest)
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return sm, err
	}
	sm.value = v
	return sm, nil
}

// TestRecordingMethods: the recording methods and the exported vectors
// show up in the scrape with the values recorded.
func TestRecordingMethods(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		record   func(r *metrics.Registry)
		families []string // compared whole; nil: only want's keys are compared
		want     map[string]float64
	}{
		{
			name: "QueueWait observes seconds into the histogram",
			record: func(r *metrics.Registry) {
				r.QueueWait(250 * time.Millisecond)
				r.QueueWait(2 * time.Second)
			},
			want: map[string]float64{
				`kici_orch_queue_wait_seconds_bucket{le="0.001"}`: 0,
				`kici_orch_queue_wait_seconds_bucket{le="0.1"}`:   0,
				`kici_orch_queue_wait_seconds_bucket{le="0.25"}`:  1,
				`kici_orch_queue_wait_seconds_bucket{le="1"}`:     1,
				`kici_orch_queue_wait_seconds_bucket{le="2.5"}`:   2,
				`kici_orch_queue_wait_seconds_bucket{le="600"}`:   2,
				`kici_orch_queue_wait_seconds_bucket{le="+Inf"}`:  2,
				`kici_orch_queue_wait_seconds_sum`:                2.25,
				`kici_orch_queue_wait_seconds_count`:              2,
			},
		},
		{
			name: "TimeToStart observes seconds into the histogram",
			record: func(r *metrics.Registry) {
				r.TimeToStart(500 * time.Millisecond)
				r.TimeToStart(20 * time.Minute) // over the last bucket (600)
			},
			want: map[string]float64{
				`kici_orch_time_to_start_seconds_bucket{le="0.25"}`: 0,
				`kici_orch_time_to_start_seconds_bucket{le="0.5"}`:  1,
				`kici_orch_time_to_start_seconds_bucket{le="600"}`:  1,
				`kici_orch_time_to_start_seconds_bucket{le="+Inf"}`: 2,
				`kici_orch_time_to_start_seconds_sum`:               1200.5,
				`kici_orch_time_to_start_seconds_count`:             2,
			},
		},
		{
			name: "JobDuration observes by status",
			record: func(r *metrics.Registry) {
				r.JobDuration("success", 4*time.Second)
				r.JobDuration("success", 90*time.Second)
				r.JobDuration("failure", 1500*time.Millisecond)
			},
			want: map[string]float64{
				`kici_orch_job_duration_seconds_bucket{le="5",status="success"}`:    1,
				`kici_orch_job_duration_seconds_bucket{le="120",status="success"}`:  2,
				`kici_orch_job_duration_seconds_bucket{le="+Inf",status="success"}`: 2,
				`kici_orch_job_duration_seconds_sum{status="success"}`:              94,
				`kici_orch_job_duration_seconds_count{status="success"}`:            2,
				`kici_orch_job_duration_seconds_bucket{le="1",status="failure"}`:    0,
				`kici_orch_job_duration_seconds_bucket{le="2.5",status="failure"}`:  1,
				`kici_orch_job_duration_seconds_sum{status="failure"}`:              1.5,
				`kici_orch_job_duration_seconds_count{status="failure"}`:            1,
			},
		},
		{
			name: "ScalerProvisioning observes by backend",
			record: func(r *metrics.Registry) {
				r.ScalerProvisioning.WithLabelValues("container").Observe(0.5)
			},
			want: map[string]float64{
				`kici_orch_scaler_provisioning_seconds_bucket{backend="container",le="0.25"}`: 0,
				`kici_orch_scaler_provisioning_seconds_bucket{backend="container",le="0.5"}`:  1,
				`kici_orch_scaler_provisioning_seconds_bucket{backend="container",le="+Inf"}`: 1,
				`kici_orch_scaler_provisioning_seconds_sum{backend="container"}`:              0.5,
				`kici_orch_scaler_provisioning_seconds_count{backend="container"}`:            1,
			},
		},
		{
			name: "runs, jobs and steps by status, under kici's names and the reference's, from 0",
			record: func(r *metrics.Registry) {
				r.RunEnded("success")
				r.RunEnded("success")
				r.RunEnded("failure")
				r.JobEnded("skipped")
				r.JobEnded("skipped")
				r.JobEnded("failure")
				r.StepEnded("success")
				r.StepEnded("failure")
				r.StepEnded("cancelled")
			},
			families: []string{"kici_orch_runs_finished_total", "kici_orch_executions_total", "kici_orch_jobs_finished_total", "kici_orch_steps_total"},
			want: map[string]float64{
				`kici_orch_runs_finished_total{status="success"}`:   2,
				`kici_orch_runs_finished_total{status="failure"}`:   1,
				`kici_orch_runs_finished_total{status="cancelled"}`: 0,
				`kici_orch_executions_total{status="success"}`:      2,
				`kici_orch_executions_total{status="failed"}`:       1,
				`kici_orch_executions_total{status="cancelled"}`:    0,
				`kici_orch_jobs_finished_total{status="success"}`:   0,
				`kici_orch_jobs_finished_total{status="failure"}`:   1,
				`kici_orch_jobs_finished_total{status="cancelled"}`: 0,
				`kici_orch_jobs_finished_total{status="skipped"}`:   2,
				`kici_orch_steps_total{status="success"}`:           1,
				`kici_orch_steps_total{status="failed"}`:            1,
				`kici_orch_steps_total{status="skipped"}`:           0,
				`kici_orch_steps_total{status="cancelled"}`:         1,
			},
		},
		{
			name: "webhook deliveries by verdict, processed result and dedup hits",
			record: func(r *metrics.Registry) {
				r.Delivery("processed", 2)
				r.Delivery("processed", 0)
				r.Delivery("ignored", 0)
				r.Delivery("invalid_workflow", 1)
				r.Delivery("failed", 0)
				r.Delivery("duplicate", 0)
				r.Delivery("rejected_signature", 0)
				r.Delivery("invalid_payload", 0)
			},
			families: []string{"kici_orch_webhooks_processed_total", "kici_orch_dedup_hits_total"},
			want: map[string]float64{
				`kici_orch_webhooks_processed_total{result="matched"}`: 1,
				`kici_orch_webhooks_processed_total{result="skipped"}`: 2,
				`kici_orch_webhooks_processed_total{result="error"}`:   2,
				`kici_orch_dedup_hits_total`:                           1,
				// kici's own counter, listed whole below.
			},
		},
		{
			name: "webhook deliveries by verdict start at 0",
			record: func(r *metrics.Registry) {
				r.Delivery("processed", 1)
				r.Delivery("rejected_signature", 0)
			},
			families: []string{"kici_orch_webhook_deliveries_total"},
			want: map[string]float64{
				`kici_orch_webhook_deliveries_total{verdict="processed"}`:               1,
				`kici_orch_webhook_deliveries_total{verdict="duplicate"}`:               0,
				`kici_orch_webhook_deliveries_total{verdict="ignored"}`:                 0,
				`kici_orch_webhook_deliveries_total{verdict="rejected_signature"}`:      1,
				`kici_orch_webhook_deliveries_total{verdict="rejected_misconfigured"}`:  0,
				`kici_orch_webhook_deliveries_total{verdict="rejected_unknown_source"}`: 0,
				`kici_orch_webhook_deliveries_total{verdict="rejected_too_large"}`:      0,
				`kici_orch_webhook_deliveries_total{verdict="rejected_delivery_id"}`:    0,
				`kici_orch_webhook_deliveries_total{verdict="invalid_payload"}`:         0,
				`kici_orch_webhook_deliveries_total{verdict="invalid_workflow"}`:        0,
				`kici_orch_webhook_deliveries_total{verdict="failed"}`:                  0,
			},
		},
		{
			name: "webhooks received by reference source and a bounded event",
			record: func(r *metrics.Registry) {
				r.WebhookReceived("github", "push")
				r.WebhookReceived("github-form", "push")
				r.WebhookReceived("github", "pull_request")
				r.WebhookReceived("github", "made-up-by-a-stranger")
				r.WebhookReceived("github", "")
				r.WebhookReceived("generic", "push")
			},
			families: []string{"kici_orch_webhooks_received_total"},
			want: map[string]float64{
				`kici_orch_webhooks_received_total{event="push",source="github-direct"}`:         2,
				`kici_orch_webhooks_received_total{event="pull_request",source="github-direct"}`: 1,
				`kici_orch_webhooks_received_total{event="other",source="github-direct"}`:        2,
				`kici_orch_webhooks_received_total{event="push",source="generic"}`:               1,
			},
		},
		{
			name: "log chunks received",
			record: func(r *metrics.Registry) {
				r.LogChunkReceived()
				r.LogChunkReceived()
			},
			families: []string{"kici_orch_log_chunks_received_total"},
			want:     map[string]float64{`kici_orch_log_chunks_received_total`: 2},
		},
		{
			name: "scheduled job ticks: runs, last success and failure, consecutive failures reset by a success",
			record: func(r *metrics.Registry) {
				r.JobRan(metrics.JobCleanup, time.Unix(100, 0), errors.New("database is locked"))
				r.JobRan(metrics.JobCleanup, time.Unix(200, 0), errors.New("database is locked"))
				r.JobRan(metrics.JobRetention, time.Unix(250, 0), errors.New("disk full"))
				r.JobRan(metrics.JobRetention, time.Unix(300, 0), nil)
			},
			families: []string{"kici_orch_job_runs_total", "kici_orch_job_last_success_timestamp_seconds",
				"kici_orch_job_last_failure_timestamp_seconds", "kici_orch_job_consecutive_failures"},
			want: map[string]float64{
				`kici_orch_job_runs_total{job="cleanup",result="success"}`:      0,
				`kici_orch_job_runs_total{job="cleanup",result="failure"}`:      2,
				`kici_orch_job_runs_total{job="retention",result="success"}`:    1,
				`kici_orch_job_runs_total{job="retention",result="failure"}`:    1,
				`kici_orch_job_last_success_timestamp_seconds{job="retention"}`: 300,
				`kici_orch_job_last_failure_timestamp_seconds{job="cleanup"}`:   200,
				`kici_orch_job_last_failure_timestamp_seconds{job="retention"}`: 250,
				`kici_orch_job_consecutive_failures{job="cleanup"}`:             2,
				`kici_orch_job_consecutive_failures{job="retention"}`:           0,
			},
		},
		{
			name: "retention deletions add to the kinds that start at 0",
			record: func(r *metrics.Registry) {
				r.RetentionDeleted.WithLabelValues("runs").Add(7)
			},
			families: []string{"kici_orch_retention_deleted_total"},
			want: map[string]float64{
				`kici_orch_retention_deleted_total{kind="runs"}`:           7,
				`kici_orch_retention_deleted_total{kind="audit_entries"}`:  0,
				`kici_orch_retention_deleted_total{kind="webhook_events"}`: 0,
			},
		},
		{
			name: "scaler counters",
			record: func(r *metrics.Registry) {
				r.ScalerSpawnFailures.WithLabelValues("firecracker", "true").Inc()
				r.ScalerSpawnFailures.WithLabelValues("firecracker", "false").Add(2)
				r.ScalerSpawnRefusals.WithLabelValues("fc-pool", "global").Inc()
				r.ScalerConfigReloads.WithLabelValues("attempted").Inc()
				r.ScalerConfigReloads.WithLabelValues("failed").Inc()
			},
			families: []string{"kici_orch_scaler_spawn_failures_total", "kici_orch_scaler_spawn_refusals_total", "kici_orch_scaler_config_reloads_total"},
			want: map[string]float64{
				`kici_orch_scaler_spawn_failures_total{backend="firecracker",bound="true"}`:  1,
				`kici_orch_scaler_spawn_failures_total{backend="firecracker",bound="false"}`: 2,
				`kici_orch_scaler_spawn_refusals_total{cap="global",scaler="fc-pool"}`:       1,
				`kici_orch_scaler_config_reloads_total{result="attempted"}`:                  1,
				`kici_orch_scaler_config_reloads_total{result="failed"}`:                     1,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := metrics.New()
			tt.record(r)
			res := scrape(t, serve(t, r))
			if res.status != http.StatusOK {
				t.Fatalf("scrape status: got %d (%s), want 200", res.status, res.body)
			}
			var got map[string]float64
			if tt.families != nil {
				got = res.values(tt.families...)
			} else {
				got = res.pick(tt.want)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("scraped series: got differs from want (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWatchers: each watcher's function is read at scrape time and its
// values exposed as gauges or counters.
func TestWatchers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		watch    func(r *metrics.Registry)
		families []string
		want     map[string]float64
	}{
		{
			name: "queue with no rows reports both statuses at 0 and no label",
			watch: func(r *metrics.Registry) {
				r.WatchQueue(func(context.Context) ([]metrics.QueueRow, error) { return nil, nil })
			},
			families: []string{"kici_orch_dispatch_queue_depth", "kici_orch_dispatch_queue_depth_by_label"},
			want: map[string]float64{
				`kici_orch_dispatch_queue_depth{status="pending"}`:    0,
				`kici_orch_dispatch_queue_depth{status="dispatched"}`: 0,
			},
		},
		{
			name: "queue counts by status and pending rows by label",
			watch: func(r *metrics.Registry) {
				r.WatchQueue(func(context.Context) ([]metrics.QueueRow, error) {
					return []metrics.QueueRow{
						{Status: "pending", Labels: []string{"linux", "x64"}},
						{Status: "pending", Labels: []string{"linux"}},
						{Status: "pending"},
						// A dispatched row counts by status, not by label.
						{Status: "dispatched", Labels: []string{"gpu"}},
					}, nil
				})
			},
			families: []string{"kici_orch_dispatch_queue_depth", "kici_orch_dispatch_queue_depth_by_label"},
			want: map[string]float64{
				`kici_orch_dispatch_queue_depth{status="pending"}`:       3,
				`kici_orch_dispatch_queue_depth{status="dispatched"}`:    1,
				`kici_orch_dispatch_queue_depth_by_label{label="linux"}`: 2,
				`kici_orch_dispatch_queue_depth_by_label{label="x64"}`:   1,
			},
		},
		{
			name: "scalers report active, spawning and max by scaler and backend",
			watch: func(r *metrics.Registry) {
				r.WatchScalers(func() []metrics.ScalerUsage {
					return []metrics.ScalerUsage{
						{Name: "docker-pool", Backend: "container", Active: 3, Spawning: 1, MaxAgents: 10},
						{Name: "fc-pool", Backend: "firecracker", Active: 0, Spawning: 0, MaxAgents: 4},
					}
				})
			},
			families: []string{"kici_orch_scaler_agents", "kici_orch_scaler_agents_spawning", "kici_orch_scaler_max_agents"},
			want: map[string]float64{
				`kici_orch_scaler_agents{backend="container",scaler="docker-pool"}`:          3,
				`kici_orch_scaler_agents_spawning{backend="container",scaler="docker-pool"}`: 1,
				`kici_orch_scaler_max_agents{backend="container",scaler="docker-pool"}`:      10,
				`kici_orch_scaler_agents{backend="firecracker",scaler="fc-pool"}`:            0,
				`kici_orch_scaler_agents_spawning{backend="firecracker",scaler="fc-pool"}`:   0,
				`kici_orch_scaler_max_agents{backend="firecracker",scaler="fc-pool"}`:        4,
			},
		},
		{
			name: "no scalers expose no scaler series",
			watch: func(r *metrics.Registry) {
				r.WatchScalers(func() []metrics.ScalerUsage { return nil })
			},
			families: []string{"kici_orch_scaler_agents", "kici_orch_scaler_agents_spawning", "kici_orch_scaler_max_agents"},
			want:     map[string]float64{},
		},
		{
			name: "agents connected by backend",
			watch: func(r *metrics.Registry) {
				r.WatchAgents(func() map[string]int { return map[string]int{"static": 2, "bare-metal": 1} })
			},
			families: []string{"kici_orch_agents_connected"},
			want: map[string]float64{
				`kici_orch_agents_connected{backend="static"}`:     2,
				`kici_orch_agents_connected{backend="bare-metal"}`: 1,
			},
		},
		{
			name: "log store counters",
			watch: func(r *metrics.Registry) {
				r.WatchLogs(func() metrics.LogStats { return metrics.LogStats{BytesStored: 1 << 20, ChunksStored: 42} })
			},
			families: []string{"kici_orch_log_bytes_stored_total", "kici_orch_log_chunks_stored_total"},
			want: map[string]float64{
				`kici_orch_log_bytes_stored_total`:  1 << 20,
				`kici_orch_log_chunks_stored_total`: 42,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := metrics.New()
			tt.watch(r)
			res := scrape(t, serve(t, r))
			if res.status != http.StatusOK {
				t.Fatalf("scrape status: got %d (%s), want 200", res.status, res.body)
			}
			if !strings.HasPrefix(res.contentType, "text/plain") {
				t.Errorf("Content-Type: got %q, want the text format (text/plain...)", res.contentType)
			}
			if diff := cmp.Diff(tt.want, res.values(tt.families...)); diff != "" {
				t.Errorf("scraped series: got differs from want (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWatchersReadAtEveryScrape: the watchers' functions are called at
// each scrape, so a changed value shows at the next scrape.
func TestWatchersReadAtEveryScrape(t *testing.T) {
	t.Parallel()
	var agents, bytes atomic.Int64
	r := metrics.New()
	r.WatchAgents(func() map[string]int { return map[string]int{"static": int(agents.Load())} })
	r.WatchLogs(func() metrics.LogStats { return metrics.LogStats{BytesStored: bytes.Load()} })
	url := serve(t, r)
	for _, n := range []int64{1, 5, 0} {
		agents.Store(n)
		bytes.Store(n * 100)
		res := scrape(t, url)
		got := res.values("kici_orch_agents_connected", "kici_orch_log_bytes_stored_total", "kici_orch_log_chunks_stored_total")
		want := map[string]float64{
			`kici_orch_agents_connected{backend="static"}`: float64(n),
			`kici_orch_log_bytes_stored_total`:             float64(n * 100),
			`kici_orch_log_chunks_stored_total`:            0,
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("scrape with %d agents: got differs from want (-want +got):\n%s", n, diff)
		}
	}
}

// TestQueueLabelStaysAtZero: a label once seen pending keeps reporting
// 0 after it drains (docs/metrics.md: "Sticky zero"). The steps run in
// order on one registry, so they are not parallel.
func TestQueueLabelStaysAtZero(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var rows []metrics.QueueRow
	r := metrics.New()
	r.WatchQueue(func(context.Context) ([]metrics.QueueRow, error) {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(rows), nil
	})
	url := serve(t, r)
	steps := []struct {
		name string
		rows []metrics.QueueRow
		want map[string]float64
	}{
		{
			name: "linux and gpu pending",
			rows: []metrics.QueueRow{
				{Status: "pending", Labels: []string{"linux"}},
				{Status: "pending", Labels: []string{"linux", "gpu"}},
			},
			want: map[string]float64{
				`kici_orch_dispatch_queue_depth{status="pending"}`:       2,
				`kici_orch_dispatch_queue_depth{status="dispatched"}`:    0,
				`kici_orch_dispatch_queue_depth_by_label{label="linux"}`: 2,
				`kici_orch_dispatch_queue_depth_by_label{label="gpu"}`:   1,
			},
		},
		{
			name: "gpu job dispatched, linux job still pending",
			rows: []metrics.QueueRow{
				{Status: "pending", Labels: []string{"linux"}},
				{Status: "dispatched", Labels: []string{"linux", "gpu"}},
			},
			want: map[string]float64{
				`kici_orch_dispatch_queue_depth{status="pending"}`:       1,
				`kici_orch_dispatch_queue_depth{status="dispatched"}`:    1,
				`kici_orch_dispatch_queue_depth_by_label{label="linux"}`: 1,
				`kici_orch_dispatch_queue_depth_by_label{label="gpu"}`:   0,
			},
		},
		{
			name: "queue drained",
			want: map[string]float64{
				`kici_orch_dispatch_queue_depth{status="pending"}`:       0,
				`kici_orch_dispatch_queue_depth{status="dispatched"}`:    0,
				`kici_orch_dispatch_queue_depth_by_label{label="linux"}`: 0,
				`kici_orch_dispatch_queue_depth_by_label{label="gpu"}`:   0,
			},
		},
		{
			name: "a new label joins the sticky ones",
			rows: []metrics.QueueRow{{Status: "pending", Labels: []string{"arm64"}}},
			want: map[string]float64{
				`kici_orch_dispatch_queue_depth{status="pending"}`:       1,
				`kici_orch_dispatch_queue_depth{status="dispatched"}`:    0,
				`kici_orch_dispatch_queue_depth_by_label{label="linux"}`: 0,
				`kici_orch_dispatch_queue_depth_by_label{label="gpu"}`:   0,
				`kici_orch_dispatch_queue_depth_by_label{label="arm64"}`: 1,
			},
		},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			mu.Lock()
			rows = st.rows
			mu.Unlock()
			res := scrape(t, url)
			if res.status != http.StatusOK {
				t.Fatalf("scrape status: got %d (%s), want 200", res.status, res.body)
			}
			got := res.values("kici_orch_dispatch_queue_depth", "kici_orch_dispatch_queue_depth_by_label")
			if diff := cmp.Diff(st.want, got); diff != "" {
				t.Errorf("queue depth: got differs from want (-want +got):\n%s", diff)
			}
		})
	}
}

// TestQueueListerError: when the queue lister fails, the scrape still
// answers 200 with every other series and leaves the queue gauges out
// (with promhttp's default, one database error answered the whole scrape
// with 500 and Prometheus saw the target down). Once the lister recovers
// the queue gauges are back. The lister gets a context with a deadline.
func TestQueueListerError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		rows []metrics.QueueRow // returned along with the error
	}{
		{name: "error and no rows"},
		{name: "error with partial rows", rows: []metrics.QueueRow{{Status: "pending", Labels: []string{"linux"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var failing atomic.Bool
			failing.Store(true)
			var noDeadline atomic.Bool
			r := metrics.New()
			r.WatchQueue(func(ctx context.Context) ([]metrics.QueueRow, error) {
				if _, ok := ctx.Deadline(); !ok {
					noDeadline.Store(true)
				}
				if failing.Load() {
					return tt.rows, errors.New("database is locked")
				}
				return []metrics.QueueRow{{Status: "pending", Labels: []string{"linux"}}}, nil
			})
			r.WatchAgents(func() map[string]int { return map[string]int{"static": 1} })
			r.RunsFinished.WithLabelValues("success").Inc()
			url := serve(t, r)

			// The failing collector's series are left out; every other
			// series is still served, so the target does not go down.
			res := scrape(t, url)
			if res.status != http.StatusOK {
				t.Fatalf("scrape with a failing lister: got status %d (%s), want 200", res.status, res.body)
			}
			for _, name := range []string{"kici_orch_runs_finished_total", "kici_orch_agents_connected", "go_goroutines"} {
				if !strings.Contains(res.body, name) {
					t.Errorf("scrape with a failing lister: got no %s, want the other series served", name)
				}
			}
			if strings.Contains(res.body, "kici_orch_dispatch_queue_depth{") {
				t.Errorf("scrape with a failing lister: got queue gauges, want them left out")
			}

			failing.Store(false)
			res = scrape(t, url)
			if res.status != http.StatusOK {
				t.Fatalf("scrape after recovery: got status %d (%s), want 200", res.status, res.body)
			}
			got := res.values("kici_orch_dispatch_queue_depth", "kici_orch_dispatch_queue_depth_by_label", "kici_orch_runs_finished_total")
			want := map[string]float64{
				`kici_orch_dispatch_queue_depth{status="pending"}`:       1,
				`kici_orch_dispatch_queue_depth{status="dispatched"}`:    0,
				`kici_orch_dispatch_queue_depth_by_label{label="linux"}`: 1,
				`kici_orch_runs_finished_total{status="success"}`:        1,
				`kici_orch_runs_finished_total{status="failure"}`:        0,
				`kici_orch_runs_finished_total{status="cancelled"}`:      0,
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("scrape after recovery: got differs from want (-want +got):\n%s", diff)
			}
			if noDeadline.Load() {
				t.Errorf("lister context: got no deadline, want one (a bounded database read)")
			}
		})
	}
}

// docMetric is one row of docs/metrics.md's table.
type docMetric struct {
	name   string
	typ    string   // counter, gauge, histogram
	labels []string // sorted; nil for none
	// first and last finite bucket bounds of a histogram, "" otherwise.
	low, high string
	// alwaysEmitted are the label values the doc says are always
	// exposed, for a metric with one label; nil when it says none.
	alwaysEmitted []string
	scalerOnly    bool
}

// documentedMetrics parses docs/metrics.md's table of kici metrics.
func documentedMetrics(t *testing.T) []docMetric {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("..", "..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| `(kici_[a-z0-9_]+)` \\|(.*)$")
	hist := regexp.MustCompile(`^histogram \(([0-9.]+)…([0-9.]+)\)$`)
	parens := regexp.MustCompile(`\(([^)]*)\)`)
	ticked := regexp.MustCompile("`([a-z_]+)`")
	var out []docMetric
	for _, line := range strings.Split(string(text), "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		cells := strings.Split(m[2], "|")
		if len(cells) < 4 {
			t.Fatalf("docs/metrics.md row of %s: got %d cells, want at least 4", m[1], len(cells))
		}
		d := docMetric{name: m[1], scalerOnly: strings.TrimSpace(cells[2]) == "scaler"}
		typ := strings.TrimSpace(cells[0])
		if h := hist.FindStringSubmatch(typ); h != nil {
			d.typ, d.low, d.high = "histogram", h[1], h[2]
		} else {
			d.typ = typ
		}
		labelCell := strings.TrimSpace(cells[1])
		for _, l := range ticked.FindAllStringSubmatch(parens.ReplaceAllString(labelCell, ""), -1) {
			d.labels = append(d.labels, l[1])
		}
		sort.Strings(d.labels)
		if p := parens.FindStringSubmatch(labelCell); p != nil && len(d.labels) == 1 {
			values, note, ok := strings.Cut(p[1], ";")
			if ok && strings.Contains(note, "always emitted") {
				for _, v := range strings.Split(values, ",") {
					d.alwaysEmitted = append(d.alwaysEmitted, strings.TrimSpace(v))
				}
				sort.Strings(d.alwaysEmitted)
			}
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		t.Fatal("docs/metrics.md lists no kici_ metric")
	}
	return out
}

// fullRegistry returns a registry with every watcher registered and one
// sample recorded on every labelled metric, with label values the doc
// names.
func fullRegistry() *metrics.Registry {
	r := metrics.New()
	r.WatchQueue(func(context.Context) ([]metrics.QueueRow, error) {
		return []metrics.QueueRow{{Status: "pending", Labels: []string{"linux"}}}, nil
	})
	r.WatchScalers(func() []metrics.ScalerUsage {
		return []metrics.ScalerUsage{{Name: "pool", Backend: "container", Active: 1, MaxAgents: 2}}
	})
	r.WatchAgents(func() map[string]int { return map[string]int{"static": 1} })
	r.WatchLogs(func() metrics.LogStats { return metrics.LogStats{BytesStored: 10, ChunksStored: 1} })
	r.WatchClusterEvents(func() float64 { return 2 })
	r.WatchClusterWorkers(metrics.ClusterWorkers{Connected: func() int { return 1 }, OutboxDepth: func() map[string]int { return map[string]int{"worker-1": 3} }})
	r.QueueWait(time.Second)
	r.TimeToStart(time.Second)
	r.JobDuration("success", time.Second)
	r.RunEnded("failure")
	r.JobEnded("cancelled")
	r.StepEnded("success")
	r.Delivery("duplicate", 0)
	r.WebhookReceived("github", "push")
	r.LogChunkReceived()
	r.JobRan(metrics.JobCleanup, time.Unix(1, 0), nil)
	r.JobRan(metrics.JobCleanup, time.Unix(2, 0), errors.New("failed"))
	r.RetentionDeleted.WithLabelValues("audit_entries").Inc()
	r.ScalerSpawnFailures.WithLabelValues("bare-metal", "false").Inc()
	r.ScalerSpawnRefusals.WithLabelValues("pool", "scaler").Inc()
	r.ScalerConfigReloads.WithLabelValues("success").Inc()
	r.ScalerProvisioning.WithLabelValues("container").Observe(1)
	r.CacheLookup("hit")
	r.CacheBytes(10)
	r.ArtifactStored(10)
	return r
}

// TestMetricsMatchDocs: every metric docs/metrics.md lists is exposed
// with the documented type, label names and (for histograms) bucket
// range, and the registry exposes no kici_ metric the doc does not list.
func TestMetricsMatchDocs(t *testing.T) {
	t.Parallel()
	doc := documentedMetrics(t)
	res := scrape(t, serve(t, fullRegistry()))
	if res.status != http.StatusOK {
		t.Fatalf("scrape status: got %d (%s), want 200", res.status, res.body)
	}
	listed := map[string]bool{}
	for _, d := range doc {
		listed[d.name] = true
	}
	for name := range res.types {
		if strings.HasPrefix(name, "kici_") && !listed[name] {
			t.Errorf("exposed family %s: got it unlisted, want it in docs/metrics.md", name)
		}
	}
	for _, d := range doc {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			if got := res.types[d.name]; got != d.typ {
				t.Fatalf("type: got %q, want %q (docs/metrics.md)", got, d.typ)
			}
			samples := res.family(d.name)
			if len(samples) == 0 {
				t.Fatalf("samples: got none, want at least one")
			}
			var bounds []string
			for _, sm := range samples {
				var names []string
				for n, v := range sm.labels {
					if n == "le" {
						if v != "+Inf" {
							bounds = append(bounds, v)
						}
						continue
					}
					names = append(names, n)
				}
				sort.Strings(names)
				if diff := cmp.Diff(d.labels, names); diff != "" {
					t.Errorf("label names of %s: got %v, want %v (docs/metrics.md) (-want +got):\n%s", sm.key(), names, d.labels, diff)
				}
			}
			if d.typ != "histogram" {
				return
			}
			if len(bounds) == 0 {
				t.Fatalf("bucket bounds: got none, want %s…%s", d.low, d.high)
			}
			sort.Slice(bounds, func(i, j int) bool {
				a, _ := strconv.ParseFloat(bounds[i], 64)
				b, _ := strconv.ParseFloat(bounds[j], 64)
				return a < b
			})
			got := []string{bounds[0], bounds[len(bounds)-1]}
			want := []string{d.low, d.high}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("bucket range: got %s…%s, want %s…%s (docs/metrics.md) (-want +got):\n%s", got[0], got[1], want[0], want[1], diff)
			}
		})
	}
}

// TestAlwaysEmittedLabelValues: a metric whose doc row says its label
// values are always emitted exposes exactly those values, at 0, on a
// registry nothing was recorded into (the queue being empty).
func TestAlwaysEmittedLabelValues(t *testing.T) {
	t.Parallel()
	r := metrics.New()
	r.WatchQueue(func(context.Context) ([]metrics.QueueRow, error) { return nil, nil })
	res := scrape(t, serve(t, r))
	if res.status != http.StatusOK {
		t.Fatalf("scrape status: got %d (%s), want 200", res.status, res.body)
	}
	var tests []docMetric
	for _, d := range documentedMetrics(t) {
		if d.alwaysEmitted != nil {
			tests = append(tests, d)
		}
	}
	// The doc marks these today; a row losing its note should fail
	// here rather than make the test vacuous.
	var names []string
	for _, d := range tests {
		names = append(names, d.name)
	}
	wantNames := []string{"kici_orch_runs_finished_total", "kici_orch_executions_total", "kici_orch_jobs_finished_total",
		"kici_orch_steps_total", "kici_orch_dispatch_queue_depth", "kici_orch_webhook_deliveries_total",
		"kici_orch_webhooks_processed_total", "kici_orch_retention_deleted_total", "kici_orch_cache_requests_total"}
	if diff := cmp.Diff(wantNames, names); diff != "" {
		t.Errorf("doc rows with always-emitted values: got %v (-want +got):\n%s", names, diff)
	}
	for _, d := range tests {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			want := map[string]float64{}
			for _, v := range d.alwaysEmitted {
				want[sample{name: d.name, labels: map[string]string{d.labels[0]: v}}.key()] = 0
			}
			if diff := cmp.Diff(want, res.values(d.name)); diff != "" {
				t.Errorf("series of %s: got differs from want %v (docs/metrics.md) (-want +got):\n%s", d.name, d.alwaysEmitted, diff)
			}
		})
	}
}

// TestRuntimeAndProcessCollectors: the Go runtime and process collectors
// docs/metrics.md names are registered.
func TestRuntimeAndProcessCollectors(t *testing.T) {
	t.Parallel()
	res := scrape(t, serve(t, metrics.New()))
	if res.status != http.StatusOK {
		t.Fatalf("scrape status: got %d (%s), want 200", res.status, res.body)
	}
	tests := []struct {
		name string
		typ  string
	}{
		{name: "go_goroutines", typ: "gauge"},
		{name: "go_threads", typ: "gauge"},
		{name: "go_gc_duration_seconds", typ: "summary"},
		{name: "go_info", typ: "gauge"},
		{name: "go_sched_gomaxprocs_threads", typ: "gauge"},
		{name: "go_gc_gomemlimit_bytes", typ: "gauge"},
		{name: "process_cpu_seconds_total", typ: "counter"},
		{name: "process_resident_memory_bytes", typ: "gauge"},
		{name: "process_virtual_memory_bytes", typ: "gauge"},
		{name: "process_open_fds", typ: "gauge"},
		{name: "process_max_fds", typ: "gauge"},
		{name: "process_start_time_seconds", typ: "gauge"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := res.types[tt.name]; got != tt.typ {
				t.Errorf("type of %s: got %q, want %q", tt.name, got, tt.typ)
			}
		})
	}
}

// TestConcurrentUse: recording from many goroutines while scraping
// concurrently loses no observation (run under -race).
func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	const workers, each = 8, 50
	r := metrics.New()
	r.WatchQueue(func(context.Context) ([]metrics.QueueRow, error) {
		return []metrics.QueueRow{{Status: "pending", Labels: []string{"linux"}}}, nil
	})
	url := serve(t, r)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				r.QueueWait(time.Millisecond)
				r.TimeToStart(time.Millisecond)
				r.JobDuration("success", time.Millisecond)
			}
		})
	}
	for range 4 {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
			if err != nil {
				t.Error(err)
				return
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("concurrent scrape status: got %d, want 200", resp.StatusCode)
			}
		})
	}
	wg.Wait()
	res := scrape(t, url)
	want := map[string]float64{
		`kici_orch_queue_wait_seconds_count`:                     workers * each,
		`kici_orch_time_to_start_seconds_count`:                  workers * each,
		`kici_orch_job_duration_seconds_count{status="success"}`: workers * each,
	}
	if diff := cmp.Diff(want, res.pick(want)); diff != "" {
		t.Errorf("counts after concurrent recording: got differs from want (-want +got):\n%s", diff)
	}
}
