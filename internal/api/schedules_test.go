package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kici-dev/kici/internal/api"
	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/auth"
	"github.com/kici-dev/kici/internal/store"
)

// fakeScheduleLister is a scheduler's cache with a fixed content: what
// ListSchedules returns, and how often it was asked.
type fakeScheduleLister struct {
	list apiv1.ScheduleList
	err  error

	mu    sync.Mutex
	calls int
}

// called is how many times ListSchedules was called.
func (f *fakeScheduleLister) called() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func (f *fakeScheduleLister) ListSchedules(ctx context.Context) (apiv1.ScheduleList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return f.list, f.err
}

// scheduleFixture is a list of two sources' schedules, one of them with a
// problem too, and a third source that has only a problem.
func scheduleFixture() apiv1.ScheduleList {
	at := time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC)
	next := at.Add(42 * time.Second)
	nightly := time.Date(2026, 3, 15, 3, 0, 0, 0, time.UTC)
	return apiv1.ScheduleList{
		Schedules: []apiv1.Schedule{
			{Source: "alpha", Workflow: "nightly", File: ".kici/workflows/nightly.yml", Cron: "0 3 * * *", SHA: "9fceb02d0ae598e95dc970b74767f19372d61af8", NextTick: &nightly,
				LastRun: &apiv1.ScheduledRun{Tick: nightly.Add(-24 * time.Hour), RunID: "r-1", Status: "success"}},
			{Source: "alpha", Workflow: "poll", File: ".kici/workflows/poll.yml", Cron: "* * * * *", SHA: "9fceb02d0ae598e95dc970b74767f19372d61af8", NextTick: &next},
			{Source: "beta", Workflow: "never", File: ".kici/workflows/never.yml", Cron: "0 0 30 2 *", SHA: "1111111111111111111111111111111111111111",
				LastRun: &apiv1.ScheduledRun{Tick: at.Add(-time.Hour), RunID: "r-2"}},
		},
		Problems: []apiv1.ScheduleProblem{
			{Source: "beta", Error: ".kici/workflows/bad.yml:3:1: unknown key \"oops\"\n.kici/workflows/bad.yml:9:7: step 1 has neither run nor uses", At: at},
			{Source: "gamma", Error: `default branch: ref "main" not found`, At: at},
		},
		RefreshedAt: at,
	}
}

// scheduleServer serves the API with lister as its schedule cache, on a
// fresh SQLite store (for the admin tokens), on a loopback port. The
// routes under test use neither pipeline nor dispatcher, so none is built.
func scheduleServer(t *testing.T, lister api.ScheduleLister) (base string, tokens *auth.AdminTokens) {
	t.Helper()
	db, err := store.Open(t.Context(), store.Config{DataDir: t.TempDir(), MaxConns: 2})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	if err := db.Migrate(t.Context()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	tokens = auth.NewAdminTokens(db, auth.AdminTokensConfig{Bootstrap: adminToken})
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))
	srv := api.New(logger, db, nil, nil, nil, nil, nil, api.Config{AdminTokens: tokens, Schedules: lister})
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return hs.URL, tokens
}

// getSchedules sends GET /api/v1/schedules (with query) as token.
func getSchedules(t *testing.T, base, token, query string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/api/v1/schedules"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /api/v1/schedules%s: %v", query, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp.StatusCode, body
}

// TestListSchedules: GET /api/v1/schedules returns the lister's list as
// it is, or only one source's schedules and problems with ?source=, with
// "schedules" an array even when empty; without a lister it answers 503.
func TestListSchedules(t *testing.T) {
	t.Parallel()
	full := scheduleFixture()
	tests := []struct {
		name   string
		lister api.ScheduleLister // nil: the orchestrator has no scheduler
		query  string
		status int
		want   apiv1.ScheduleList // when status is 200
		// wantBody is a substring of the raw answer.
		wantBody string
	}{
		{name: "everything", lister: &fakeScheduleLister{list: scheduleFixture()}, status: http.StatusOK, want: full},
		{name: "one source", lister: &fakeScheduleLister{list: scheduleFixture()}, query: "?source=beta", status: http.StatusOK,
			want: apiv1.ScheduleList{Schedules: full.Schedules[2:3], Problems: full.Problems[0:1], RefreshedAt: full.RefreshedAt}},
		{name: "a source with only a problem", lister: &fakeScheduleLister{list: scheduleFixture()}, query: "?source=gamma", status: http.StatusOK,
			want: apiv1.ScheduleList{Schedules: []apiv1.Schedule{}, Problems: full.Problems[1:2], RefreshedAt: full.RefreshedAt}, wantBody: `"schedules": []`},
		{name: "the source filter is exact", lister: &fakeScheduleLister{list: scheduleFixture()}, query: "?source=alph", status: http.StatusOK,
			want: apiv1.ScheduleList{Schedules: []apiv1.Schedule{}, RefreshedAt: full.RefreshedAt}, wantBody: `"schedules": []`},
		{name: "no schedule at all", lister: &fakeScheduleLister{}, status: http.StatusOK,
			want: apiv1.ScheduleList{Schedules: []apiv1.Schedule{}}, wantBody: `"schedules": []`},
		{name: "no scheduler", lister: nil, status: http.StatusServiceUnavailable, wantBody: `"error": "schedules are not available on this orchestrator"`},
		{name: "the lister fails", lister: &fakeScheduleLister{err: errors.New("cache broken")}, status: http.StatusInternalServerError,
			wantBody: `"error": "list schedules: internal error (see the orchestrator log)"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			base, _ := scheduleServer(t, tt.lister)
			status, body := getSchedules(t, base, adminToken, tt.query)
			if status != tt.status {
				t.Fatalf("got status %d (%s), want %d", status, body, tt.status)
			}
			if !strings.Contains(string(body), tt.wantBody) {
				t.Errorf("got body %s, want it to contain %s", body, tt.wantBody)
			}
			if status != http.StatusOK {
				return
			}
			var got apiv1.ScheduleList
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("decode %s: %v", body, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("schedules differ (-want +got):\n%s", diff)
			}
		})
	}
}

// TestListSchedulesFilterLeavesTheCacheAlone: a filtered answer does not
// change what the lister handed out (it may be the cache's own slices),
// so the next unfiltered answer is the whole list again.
func TestListSchedulesFilterLeavesTheCacheAlone(t *testing.T) {
	t.Parallel()
	fake := &fakeScheduleLister{list: scheduleFixture()}
	base, _ := scheduleServer(t, fake)
	if status, body := getSchedules(t, base, adminToken, "?source=beta"); status != http.StatusOK {
		t.Fatalf("filtered: got status %d (%s), want 200", status, body)
	}
	if diff := cmp.Diff(scheduleFixture(), fake.list); diff != "" {
		t.Errorf("the lister's list changed (-want +got):\n%s", diff)
	}
	status, body := getSchedules(t, base, adminToken, "")
	if status != http.StatusOK {
		t.Fatalf("unfiltered: got status %d (%s), want 200", status, body)
	}
	var got apiv1.ScheduleList
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	if diff := cmp.Diff(scheduleFixture(), got); diff != "" {
		t.Errorf("unfiltered answer differs (-want +got):\n%s", diff)
	}
	if n := fake.called(); n != 2 {
		t.Errorf("got %d calls of ListSchedules, want 2 (one per request, no caching in the API)", n)
	}
}

// TestListSchedulesAccess: reading schedules needs run.read, which the
// read-only auditor role has; no token is refused.
func TestListSchedulesAccess(t *testing.T) {
	t.Parallel()
	fake := &fakeScheduleLister{list: scheduleFixture()}
	base, tokens := scheduleServer(t, fake)
	token, _, err := tokens.Create(t.Context(), "reader", auth.Auditor, auth.Principal{ID: auth.BootstrapID}, nil)
	if err != nil {
		t.Fatalf("create auditor token: %v", err)
	}
	status, body := getSchedules(t, base, token, "?source=alpha")
	if status != http.StatusOK {
		t.Fatalf("auditor: got status %d (%s), want 200", status, body)
	}
	var got apiv1.ScheduleList
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	if len(got.Schedules) != 2 {
		t.Errorf("auditor: got %d schedules, want the 2 of alpha", len(got.Schedules))
	}
	if status, body := getSchedules(t, base, "", ""); status != http.StatusUnauthorized {
		t.Errorf("no token: got status %d (%s), want 401", status, body)
	}
}
