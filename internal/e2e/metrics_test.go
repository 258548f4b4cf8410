package e2e

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/apiv1"
)

// documentedMetrics returns the metric names of docs/metrics.md's table,
// each with whether it only appears with a scaler configured, after a
// scheduled job's failure, or on coordinators (so not after a plain run
// of a standalone orchestrator).
func documentedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("..", "..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| `(kici_[a-z0-9_]+)` \\|(.*)$")
	out := map[string]bool{}
	for _, line := range strings.Split(string(text), "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		cells := strings.Split(m[2], "|")
		when := ""
		if len(cells) > 2 {
			when = strings.TrimSpace(cells[2])
		}
		// Metrics of scalers, failures and coordinators are not
		// exposed by a standalone orchestrator without them.
		out[m[1]] = when == "scaler" || when == "after a failure" || strings.HasPrefix(when, "coordinators")
	}
	if len(out) == 0 {
		t.Fatal("docs/metrics.md lists no kici_ metric")
	}
	return out
}

// exposedMetrics returns the metric families the orchestrator exposes
// (from its # TYPE lines).
func (o *orchestrator) exposedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	resp, err := http.Get("http://" + o.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	families := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, _, _ := strings.Cut(rest, " ")
			families[name] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return families
}

// TestMetricsListedInDocsAreExposed: after a run (and a webhook delivery),
// /metrics exposes every metric docs/metrics.md lists, except those only a
// configured scaler produces, and exposes no kici_ metric the doc misses.
func TestMetricsListedInDocsAreExposed(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		o := startOrchestrator(t, dbURL)
		o.addRepo(t, map[string]string{"ci.yml": `
on: {push: {branches: [main]}}
jobs:
  build:
    runs-on: [linux]
    steps:
      - run: echo hello metrics
`})
		// The job waits for an agent first, so the queue depth by label
		// sees it; the label then stays reported at 0.
		id := o.push(t)
		waitFor(t, 10*time.Second, "queue depth of label linux at 1", func() bool {
			return o.hasMetric(t, `kici_orch_dispatch_queue_depth_by_label{label="linux"} 1`)
		})
		startAgent(t, o, "", "agent-m", []string{"linux"})
		r := o.waitRun(t, id, 60*time.Second, "run to end", ended)
		if r.Status != "success" {
			t.Fatalf("run status: got %s (%s), want success", r.Status, r.Error)
		}
		// The local source has no webhook secret: the delivery is
		// recorded as rejected_misconfigured.
		resp, err := http.Post("http://"+o.addr+"/webhooks/generic/repo", "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()

		doc := documentedMetrics(t)
		families := o.exposedMetrics(t)
		for name, scalerOnly := range doc {
			if !scalerOnly && !families[name] {
				t.Errorf("docs/metrics.md lists %s; /metrics does not expose it", name)
			}
		}
		for name := range families {
			if strings.HasPrefix(name, "kici_") {
				if _, ok := doc[name]; !ok {
					t.Errorf("/metrics exposes %s; docs/metrics.md does not list it", name)
				}
			}
		}
		for _, want := range []string{"go_goroutines", "process_resident_memory_bytes"} {
			if !families[want] {
				t.Errorf("/metrics lacks the runtime/process metric %s", want)
			}
		}
		// The phase histograms observed this run.
		for _, want := range []string{
			"kici_orch_queue_wait_seconds_count 1",
			"kici_orch_time_to_start_seconds_count 1",
			`kici_orch_job_duration_seconds_count{status="success"} 1`,
			`kici_orch_agents_connected{backend="static"} 1`,
			`kici_orch_dispatch_queue_depth_by_label{label="linux"} 0`,
			`kici_orch_webhook_deliveries_total{verdict="rejected_misconfigured"} 1`,
		} {
			if !o.hasMetric(t, want) {
				t.Errorf("/metrics lacks the sample %q", want)
			}
		}
		if v := o.metric(t, "kici_orch_log_bytes_stored_total"); v <= 0 {
			t.Errorf("kici_orch_log_bytes_stored_total = %v after a job that logged, want > 0", v)
		}
	})
}

// TestReferenceMetricNames: after real events on a real orchestrator (a
// signed GitHub push that runs a two-step job to success, the same
// delivery again, a ping, and the log chunks of the job) /metrics carries
// the reference orchestrator's series with its label values and the
// counts of those events, beside kici's own names.
func TestReferenceMetricNames(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, dbURL string) {
		o := startOrchestrator(t, dbURL)
		dir := o.addRepo(t, map[string]string{"ci.yml": `
on: {push: {branches: [main]}}
jobs:
  build:
    runs-on: [linux]
    steps:
      - run: echo first
      - run: echo second
`})
		const hook = "reference-metrics-hook"
		o.api(t, "POST", "/api/v1/sources", apiv1.Source{Name: "hooked", Kind: "local", Path: dir, WebhookSecret: hook}, nil, http.StatusCreated)
		startAgent(t, o, "", "agent-ref", []string{"linux"})
		sha := gitIn(t, dir, "rev-parse", "HEAD")
		push := fmt.Appendf(nil, `{"ref": "refs/heads/main", "before": %q, "after": %q,
  "repository": {"full_name": "octo-org/hello", "default_branch": "main"},
  "pusher": {"name": "mona"}, "sender": {"login": "mona"}, "commits": []}`, sha, sha)
		tr := o.postGitHub(t, "hooked", hook, "push", "ref-metrics-1", push)
		if len(tr.Runs) != 1 {
			t.Fatalf("push started %d runs, want 1", len(tr.Runs))
		}
		r := o.waitRun(t, tr.Runs[0].ID, 60*time.Second, "run to end", ended)
		if r.Status != "success" {
			t.Fatalf("run status: got %s (%s), want success", r.Status, r.Error)
		}
		if dup := o.postGitHub(t, "hooked", hook, "push", "ref-metrics-1", push); len(dup.Runs) != 0 {
			t.Fatalf("redelivered push started %d runs, want 0 (a duplicate)", len(dup.Runs))
		}
		o.postGitHub(t, "hooked", hook, "ping", "ref-metrics-2", []byte(`{"zen": "Keep it logically awesome."}`))

		// The run's status is read from the database; its counters are
		// published right after the commit, so wait for them.
		waitFor(t, 10*time.Second, "the run counted", func() bool {
			return o.hasMetric(t, `kici_orch_executions_total{status="success"} 1`)
		})
		// The delivery id purge runs once at start, in the background.
		waitFor(t, 10*time.Second, "the cleanup tick counted", func() bool {
			return o.hasMetric(t, `kici_orch_job_runs_total{job="cleanup",result="success"} 1`)
		})
		for _, want := range []string{
			`kici_orch_executions_total{status="failed"} 0`,
			`kici_orch_executions_total{status="cancelled"} 0`,
			`kici_orch_runs_finished_total{status="success"} 1`,
			`kici_orch_steps_total{status="success"} 2`,
			`kici_orch_steps_total{status="failed"} 0`,
			`kici_orch_agents_active 1`,
			`kici_orch_agents_connected{backend="static"} 1`,
			`kici_orch_webhooks_received_total{event="push",source="github-direct"} 2`,
			`kici_orch_webhooks_received_total{event="ping",source="github-direct"} 1`,
			`kici_orch_webhooks_processed_total{result="matched"} 1`,
			`kici_orch_webhooks_processed_total{result="skipped"} 1`,
			`kici_orch_webhooks_processed_total{result="error"} 0`,
			`kici_orch_dedup_hits_total 1`,
			`kici_orch_webhook_deliveries_total{verdict="duplicate"} 1`,
			`kici_orch_job_runs_total{job="cleanup",result="failure"} 0`,
			`kici_orch_job_consecutive_failures{job="cleanup"} 0`,
		} {
			if !o.hasMetric(t, want) {
				t.Errorf("/metrics lacks the sample %q", want)
			}
		}
		// Every chunk the agent sent was stored once: received equals
		// stored, and the job logged.
		received := o.metric(t, "kici_orch_log_chunks_received_total")
		stored := o.metric(t, "kici_orch_log_chunks_stored_total")
		if received < 1 || received != stored {
			t.Errorf("log chunks: got %v received and %v stored, want the same count, at least 1", received, stored)
		}
	})
}
