//go:build unix

package runner_test

import (
	"crypto/sha256"
	"encoding/hex"
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

// TestInlineArchive: an archive sent with the dispatch is extracted without
// any request to the orchestrator, with the same checks as a downloaded
// one; one whose SHA-256 is not the one named fails the job without being
// extracted; without one the agent downloads the archive.
func TestInlineArchive(t *testing.T) {
	t.Parallel()
	good := tarGz(t, entry{name: "hello.txt", body: "hi\n", typ: '0'})
	evil := tarGz(t, entry{name: "../evil", body: "x", typ: '0'})
	sum := func(b []byte) string {
		s := sha256.Sum256(b)
		return hex.EncodeToString(s[:])
	}
	tests := []struct {
		name      string
		inline    []byte
		sha       string
		maxBytes  int64
		want      runner.Status
		wantCalls int32
		wantErr   string
	}{
		{name: "inline, no request", inline: good, sha: sum(good), want: runner.StatusSuccess},
		{name: "corrupt inline fails", inline: good, sha: sum([]byte("other")), want: runner.StatusFailure,
			wantErr: "inline archive is corrupt: "},
		{name: "inline path traversal refused", inline: evil, sha: sum(evil), want: runner.StatusFailure, wantErr: "extract archive"},
		{name: "inline over the size limit refused", inline: good, sha: sum(good), maxBytes: 1, want: runner.StatusFailure, wantErr: "extract archive"},
		{name: "none, downloaded", want: runner.StatusSuccess, wantCalls: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				_, _ = w.Write(good)
			}))
			defer srv.Close()
			r := newRunner(t, func(c *runner.Config) { c.MaxArchiveBytes = tc.maxBytes })
			spec := runner.JobSpec{
				ID:  "job-1",
				Job: workflow.Job{Name: "test", Steps: []workflow.Step{{Name: "cat", Run: "cat hello.txt"}}},
				Source: runner.Source{Kind: runner.SourceArchive, ArchiveURL: srv.URL + "/archive.tar.gz",
					ArchiveInline: tc.inline, ArchiveSHA256: tc.sha},
			}
			rec := newRecorder()
			res := r.Run(t.Context(), spec, rec)
			if res.Status != tc.want || !strings.Contains(errText(res.Err), tc.wantErr) {
				t.Errorf("result: got %s (%v), want %s with %q", res.Status, res.Err, tc.want, tc.wantErr)
			}
			if got := calls.Load(); got != tc.wantCalls {
				t.Errorf("archive requests: got %d, want %d", got, tc.wantCalls)
			}
		})
	}
}
