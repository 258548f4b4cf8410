//go:build unix

package runner_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kici-dev/kici/internal/agent/runner"
	"github.com/kici-dev/kici/internal/workflow"
)

// TestFetchArchiveRetries: the orchestrator's answer to an archive request
// decides whether the agent tries again. A 5xx (its database dropped a
// connection) is retried and the job runs; a 403 (the job token refused)
// fails the job after one request.
func TestFetchArchiveRetries(t *testing.T) {
	// Not parallel: it shortens the package's retry delays.
	defer runner.SetArchiveRetryDelays([]time.Duration{time.Millisecond, time.Millisecond, time.Millisecond})()
	archive := tarGz(t, entry{name: "hello.txt", body: "hi\n", typ: '0'})
	tests := []struct {
		name      string
		failures  []int // status codes answered before the archive
		want      runner.Status
		wantCalls int32
		wantErr   string
	}{
		{name: "503 twice, then the archive", failures: []int{503, 500}, want: runner.StatusSuccess, wantCalls: 3},
		{name: "403 is final", failures: []int{403}, want: runner.StatusFailure, wantCalls: 1, wantErr: "HTTP 403"},
		{name: "5xx past the retries fails", failures: []int{503, 503, 503, 503, 503}, want: runner.StatusFailure, wantCalls: 4, wantErr: "HTTP 503"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := int(calls.Add(1))
				if n <= len(tc.failures) {
					http.Error(w, "no", tc.failures[n-1])
					return
				}
				_, _ = w.Write(archive)
			}))
			defer srv.Close()
			r := newRunner(t, nil)
			spec := runner.JobSpec{
				ID:     "job-1",
				Job:    workflow.Job{Name: "test", Steps: []workflow.Step{{Name: "cat", Run: "cat hello.txt"}}},
				Source: runner.Source{Kind: runner.SourceArchive, ArchiveURL: srv.URL + "/archive.tar.gz"},
			}
			res := r.Run(t.Context(), spec, newRecorder())
			if res.Status != tc.want || !strings.Contains(errText(res.Err), tc.wantErr) {
				t.Errorf("result: got %s (%v), want %s with %q", res.Status, res.Err, tc.want, tc.wantErr)
			}
			if got := calls.Load(); got != tc.wantCalls {
				t.Errorf("requests: got %d, want %d", got, tc.wantCalls)
			}
		})
	}
}
