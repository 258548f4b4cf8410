package githubfake_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/kici-dev/kici/internal/source/githubfake"
)

// TestCheckRunShapes checks the check-runs endpoints against GitHub's
// documented requests, answers and validation.
func TestCheckRunShapes(t *testing.T) {
	t.Parallel()
	s := githubfake.New("tok")
	defer s.Close()
	s.AddRepo("o/r")
	const sha = "0123456789abcdef0123456789abcdef01234567"
	call := func(method, path string, body any) (int, map[string]any) {
		t.Helper()
		data, _ := json.Marshal(body)
		req, err := http.NewRequestWithContext(t.Context(), method, s.URL+path, bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	tests := []struct {
		name   string
		method string
		path   string
		body   any
		want   int
	}{
		{"create", "POST", "/repos/o/r/check-runs", map[string]any{"name": "ci", "head_sha": sha, "external_id": "run-1"}, 201},
		{"create without head_sha", "POST", "/repos/o/r/check-runs", map[string]any{"name": "ci"}, 422},
		{"create on a bad sha", "POST", "/repos/o/r/check-runs", map[string]any{"name": "ci", "head_sha": "main"}, 422},
		{"create completed without conclusion", "POST", "/repos/o/r/check-runs", map[string]any{"name": "ci", "head_sha": sha, "status": "completed"}, 422},
		{"create with an unknown conclusion", "POST", "/repos/o/r/check-runs", map[string]any{"name": "ci", "head_sha": sha, "conclusion": "great"}, 422},
		{"create on an unknown repository", "POST", "/repos/o/nope/check-runs", map[string]any{"name": "ci", "head_sha": sha}, 404},
		{"update", "PATCH", "/repos/o/r/check-runs/1", map[string]any{"name": "ci", "status": "completed", "conclusion": "success"}, 200},
		{"update an unknown check run", "PATCH", "/repos/o/r/check-runs/99", map[string]any{"name": "ci", "status": "in_progress"}, 404},
		{"update with output lacking a summary", "PATCH", "/repos/o/r/check-runs/1", map[string]any{"name": "ci", "output": map[string]string{"title": "t"}}, 422},
	}
	for _, tt := range tests { // in order: the update needs the creation
		if got, body := call(tt.method, tt.path, tt.body); got != tt.want {
			t.Errorf("%s: got %d (%v), want %d", tt.name, got, body, tt.want)
		}
	}
	code, list := call("GET", "/repos/o/r/commits/"+sha+"/check-runs?check_name=ci&filter=all", nil)
	runs, _ := list["check_runs"].([]any)
	if code != 200 || list["total_count"] != float64(1) || len(runs) != 1 {
		t.Fatalf("list: got %d %v, want 200 with one check run", code, list)
	}
	run := runs[0].(map[string]any)
	if run["status"] != "completed" || run["conclusion"] != "success" || run["external_id"] != "run-1" || run["id"] != float64(1) {
		t.Errorf("listed check run: got %v, want id 1, completed/success, external_id run-1", run)
	}

	s.FailCheckRuns(2, http.StatusBadGateway, http.Header{"Retry-After": {"7"}})
	for i := range 2 {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", s.URL+"/repos/o/r/commits/"+sha+"/check-runs", nil)
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 502 || resp.Header.Get("Retry-After") != "7" {
			t.Errorf("failure %d: got %d with Retry-After %q, want 502 with 7", i+1, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	if code, _ := call("GET", "/repos/o/r/commits/"+sha+"/check-runs", nil); code != 200 {
		t.Errorf("after the two failures: got %d, want 200", code)
	}
	s.LoseCreateAnswers(1)
	if code, _ := call("POST", "/repos/o/r/check-runs", map[string]any{"name": "other", "head_sha": sha}); code != 502 {
		t.Errorf("create with its answer lost: got %d, want 502", code)
	}
	if got := len(s.CheckRuns("o/r")); got != 2 {
		t.Errorf("after a lost answer: got %d check runs, want 2 (it was created)", got)
	}
	if got := s.CheckRuns("o/r")[0].History; len(got) != 2 || got[1] != "completed/success" {
		t.Errorf("history: got %v, want [queued completed/success]", got)
	}
}
