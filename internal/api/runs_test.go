package api_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/auth"
)

func TestListRuns(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, h *harness) {
		dir, _ := ciRepo(t)
		h.addSource(t, "list", dir, "")
		h.addSource(t, "list-other", dir, "")
		var ids []string // oldest first
		for range 3 {
			ids = append(ids, h.trigger(t, "list")[0].ID)
		}
		otherID := h.trigger(t, "list-other")[0].ID
		newestFirst := []string{ids[2], ids[1], ids[0]}
		cancelled := h.trigger(t, "list")[0].ID
		h.mustAdmin(t, http.MethodPost, "/api/v1/runs/"+cancelled+"/cancel", nil, http.StatusOK, nil)

		tests := []struct {
			name       string
			query      string
			wantStatus int
			wantError  string
			wantIDs    []string
		}{
			{name: "all", query: "", wantStatus: http.StatusOK, wantIDs: append([]string{cancelled, otherID}, newestFirst...)},
			{name: "by source", query: "?source=list-other", wantStatus: http.StatusOK, wantIDs: []string{otherID}},
			{name: "by status", query: "?status=cancelled", wantStatus: http.StatusOK, wantIDs: []string{cancelled}},
			{name: "by source and status", query: "?source=list&status=pending", wantStatus: http.StatusOK, wantIDs: newestFirst},
			{name: "unknown source", query: "?source=no-such-source", wantStatus: http.StatusOK, wantIDs: []string{}},
			{name: "status without runs", query: "?status=success", wantStatus: http.StatusOK, wantIDs: []string{}},
			{name: "limit", query: "?source=list&status=pending&limit=2", wantStatus: http.StatusOK, wantIDs: newestFirst[:2]},
			{name: "largest limit", query: "?source=list&status=pending&limit=1000", wantStatus: http.StatusOK, wantIDs: newestFirst},
			{name: "limit 0", query: "?limit=0", wantStatus: http.StatusBadRequest, wantError: `limit "0": want 1 to 1000`},
			{name: "negative limit", query: "?limit=-1", wantStatus: http.StatusBadRequest, wantError: `limit "-1": want 1 to 1000`},
			{name: "limit over 1000", query: "?limit=1001", wantStatus: http.StatusBadRequest, wantError: `limit "1001": want 1 to 1000`},
			{name: "limit not a number", query: "?limit=ten", wantStatus: http.StatusBadRequest, wantError: `limit "ten": want 1 to 1000`},
			{name: "unknown status", query: "?status=done", wantStatus: http.StatusBadRequest, wantError: `status "done": want one of awaiting_approval, pending, running, success, failure, cancelled`},
			{name: "job status", query: "?status=queued", wantStatus: http.StatusBadRequest, wantError: `status "queued": want one of`},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				resp := h.admin(t, http.MethodGet, "/api/v1/runs"+tt.query, nil)
				if resp.status != tt.wantStatus {
					t.Fatalf("got status %d (%s), want %d", resp.status, resp.body, tt.wantStatus)
				}
				if tt.wantError != "" {
					if got := resp.apiError(t).Error; !strings.HasPrefix(got, tt.wantError) {
						t.Errorf("got error %q, want it to start with %q", got, tt.wantError)
					}
					return
				}
				var list apiv1.RunList
				resp.decode(t, &list)
				got := []string{}
				for i, r := range list.Runs {
					got = append(got, r.ID)
					if i > 0 && r.CreatedAt.After(list.Runs[i-1].CreatedAt) {
						t.Errorf("run %d created at %v after run %d at %v, want newest first", i, r.CreatedAt, i-1, list.Runs[i-1].CreatedAt)
					}
				}
				if diff := cmp.Diff(tt.wantIDs, got); diff != "" {
					t.Errorf("run ids mismatch (-want +got):\n%s", diff)
				}
			})
		}
	})
}

func TestGetRunNotFound(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, h *harness) {
		for _, path := range []string{
			"/api/v1/runs/no-such-run",
			"/api/v1/runs/no-such-run/jobs/build/logs",
			"/api/v1/runs/no-such-run/events",
		} {
			resp := h.admin(t, http.MethodGet, path, nil)
			if resp.status != http.StatusNotFound {
				t.Errorf("GET %s: got status %d (%s), want 404", path, resp.status, resp.body)
				continue
			}
			if got, want := resp.apiError(t).Error, `run "no-such-run": not found`; got != want {
				t.Errorf("GET %s: got error %q, want %q", path, got, want)
			}
		}
		for _, path := range []string{"/api/v1/runs/no-such-run/cancel", "/api/v1/runs/no-such-run/rerun"} {
			resp := h.admin(t, http.MethodPost, path, nil)
			if resp.status != http.StatusNotFound {
				t.Errorf("POST %s: got status %d (%s), want 404", path, resp.status, resp.body)
			}
		}
	})
}

func TestCancelQueuedRun(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, h *harness) {
		dir, _ := ciRepo(t)
		h.addSource(t, "cancel", dir, "")
		tests := []struct {
			name string
			body any // nil: no body
		}{
			{name: "no body"},
			{name: "empty object", body: `{}`},
			{name: "force", body: apiv1.CancelRequest{Force: true}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				id := h.trigger(t, "cancel")[0].ID
				var answer apiv1.Run
				h.mustAdmin(t, http.MethodPost, "/api/v1/runs/"+id+"/cancel", tt.body, http.StatusOK, &answer)
				// Every unfinished job is cancelled, including test, which
				// was waiting for build: all end in one transaction, so no
				// waiting job is skipped for an upstream cancelled first.
				wantJobs := map[string]string{"build": "cancelled", "lint": "cancelled", "test": "cancelled"}
				for _, run := range []apiv1.Run{answer, h.getRun(t, id)} {
					if run.Status != "cancelled" {
						t.Errorf("got run status %q, want cancelled", run.Status)
					}
					if run.FinishedAt == nil {
						t.Errorf("got no finished_at on the cancelled run, want one")
					}
					if diff := cmp.Diff(wantJobs, jobStatuses(run)); diff != "" {
						t.Errorf("job statuses mismatch (-want +got):\n%s", diff)
					}
				}
				if q := queuedJobs(t, h, id); len(q) != 0 {
					t.Errorf("got queue entries %v of the cancelled run, want none", q)
				}
				// Cancelling again is refused and changes nothing.
				resp := h.admin(t, http.MethodPost, "/api/v1/runs/"+id+"/cancel", nil)
				wantErr := fmt.Sprintf("run %q has already ended (cancelled)", id)
				if resp.status != http.StatusConflict || resp.apiError(t).Error != wantErr {
					t.Errorf("second cancel: got %d %s, want 409 %q", resp.status, resp.body, wantErr)
				}
				if diff := cmp.Diff(answer, h.getRun(t, id)); diff != "" {
					t.Errorf("second cancel changed the run (-first +second):\n%s", diff)
				}
			})
		}
	})
}

func TestRerun(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, h *harness) {
		dir, sha := ciRepo(t)
		h.addSource(t, "rerun", dir, "")
		tests := []struct {
			name   string
			cancel bool // cancel the run before re-running it
		}{
			{name: "queued run"},
			{name: "cancelled run", cancel: true},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				parentID := h.trigger(t, "rerun")[0].ID
				if tt.cancel {
					h.mustAdmin(t, http.MethodPost, "/api/v1/runs/"+parentID+"/cancel", nil, http.StatusOK, nil)
				}
				var ref apiv1.RunRef
				h.mustAdmin(t, http.MethodPost, "/api/v1/runs/"+parentID+"/rerun", nil, http.StatusCreated, &ref)
				if ref.ID == "" || ref.ID == parentID {
					t.Fatalf("got rerun id %q, want a new run (parent %q)", ref.ID, parentID)
				}
				parent, child := h.getRun(t, parentID), h.getRun(t, ref.ID)
				got := []string{ref.Workflow, child.ParentRun, child.Source, child.Workflow, child.Ref, child.SHA, child.Status}
				want := []string{"ci", parentID, "rerun", "ci", "refs/heads/main", sha, "pending"}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("child (workflow, parent_run_id, source, workflow, ref, sha, status) mismatch (-want +got):\n%s", diff)
				}
				if !bytes.Equal(parent.Event, child.Event) {
					t.Errorf("got child event %s, want the parent's %s", child.Event, parent.Event)
				}
				if parent.ParentRun != "" {
					t.Errorf("got parent_run_id %q on the original run, want none", parent.ParentRun)
				}
				wantJobs := map[string]string{"build": "queued", "lint": "queued", "test": "waiting"}
				if diff := cmp.Diff(wantJobs, jobStatuses(child)); diff != "" {
					t.Errorf("child job statuses mismatch (-want +got):\n%s", diff)
				}
			})
		}
	})
}

// TestRerunOfRemovedSource: a run of a source that was removed since
// cannot be re-run (its agents could not fetch the code), and the answer
// says why instead of starting a run that is bound to fail.
func TestRerunOfRemovedSource(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, h *harness) {
		dir, _ := ciRepo(t)
		h.addSource(t, "removed", dir, "")
		id := h.trigger(t, "removed")[0].ID
		h.mustAdmin(t, http.MethodDelete, "/api/v1/sources/removed", nil, http.StatusNoContent, nil)
		resp := h.admin(t, http.MethodPost, "/api/v1/runs/"+id+"/rerun", nil)
		if resp.status != http.StatusConflict {
			t.Fatalf("got status %d (%s), want 409", resp.status, resp.body)
		}
		if got, want := resp.apiError(t).Error, `rerun of "`+id+`": source "removed" no longer exists`; !strings.HasPrefix(got, want) {
			t.Errorf("got error %q, want it to start with %q", got, want)
		}
		if got := len(h.runs(t, "removed")); got != 1 {
			t.Errorf("got %d runs, want only the original", got)
		}
	})
}

// queuedJobs returns the queue entries of one run, by job name.
func queuedJobs(t *testing.T, h *harness, runID string) map[string]apiv1.QueueEntry {
	t.Helper()
	var q apiv1.Queue
	h.mustAdmin(t, http.MethodGet, "/api/v1/queue", nil, http.StatusOK, &q)
	out := map[string]apiv1.QueueEntry{}
	for _, e := range q.Jobs {
		if e.RunID == runID {
			out[e.Job] = e
		}
	}
	return out
}

func TestQueue(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, h *harness) {
		dir, _ := ciRepo(t)
		h.addSource(t, "queue", dir, "")
		runID := h.trigger(t, "queue")[0].ID
		run := h.getRun(t, runID)
		jobIDs := map[string]string{}
		for _, j := range run.Jobs {
			jobIDs[j.Name] = j.ID
		}

		type entry struct {
			JobID, RunID, Status, WhyPending string
			Labels                           []string
		}
		got := map[string]entry{}
		for name, e := range queuedJobs(t, h, runID) {
			if e.Enqueued.IsZero() {
				t.Errorf("job %s: got no enqueued_at, want one", name)
			}
			got[name] = entry{JobID: e.JobID, RunID: e.RunID, Status: e.Status, WhyPending: e.WhyPending, Labels: e.Labels}
		}
		// test waits for build, so it is not in the queue.
		want := map[string]entry{
			"build": {JobID: jobIDs["build"], RunID: runID, Status: "queued", Labels: []string{"linux"},
				WhyPending: "no connected agent has all of the labels [linux]"},
			"lint": {JobID: jobIDs["lint"], RunID: runID, Status: "queued", Labels: []string{"linux", "docker"},
				WhyPending: "no connected agent has all of the labels [linux docker]"},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("queue mismatch (-want +got):\n%s", diff)
		}
	})
}

func TestJobLogs(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, h *harness) {
		dir, _ := ciRepo(t)
		h.addSource(t, "logs", dir, "")
		queuedID := h.trigger(t, "logs")[0].ID
		cancelledID := h.trigger(t, "logs")[0].ID
		h.mustAdmin(t, http.MethodPost, "/api/v1/runs/"+cancelledID+"/cancel", nil, http.StatusOK, nil)
		testJobID := ""
		for _, j := range h.getRun(t, cancelledID).Jobs {
			if j.Name == "test" {
				testJobID = j.ID
			}
		}

		tests := []struct {
			name       string
			path       string
			wantStatus int
			wantError  string
			want       apiv1.LogPage
		}{
			{
				name: "queued job", path: "/api/v1/runs/" + queuedID + "/jobs/build/logs",
				wantStatus: http.StatusOK, want: apiv1.LogPage{Lines: []apiv1.LogLine{}, Next: "-2:0", Done: false},
			},
			{
				name: "cancelled job", path: "/api/v1/runs/" + cancelledID + "/jobs/build/logs",
				wantStatus: http.StatusOK, want: apiv1.LogPage{Lines: []apiv1.LogLine{}, Next: "0:0", Done: true},
			},
			{
				name: "cancelled job by id", path: "/api/v1/runs/" + cancelledID + "/jobs/" + testJobID + "/logs",
				wantStatus: http.StatusOK, want: apiv1.LogPage{Lines: []apiv1.LogLine{}, Next: "1:0", Done: true},
			},
			{
				name: "cancelled job, one step", path: "/api/v1/runs/" + cancelledID + "/jobs/test/logs?step=0",
				wantStatus: http.StatusOK, want: apiv1.LogPage{Lines: []apiv1.LogLine{}, Next: "0:0", Done: true},
			},
			{
				name: "cancelled job, last step", path: "/api/v1/runs/" + cancelledID + "/jobs/test/logs?step=1",
				wantStatus: http.StatusOK, want: apiv1.LogPage{Lines: []apiv1.LogLine{}, Next: "1:0", Done: true},
			},
			{
				name: "cancelled job, from a cursor", path: "/api/v1/runs/" + cancelledID + "/jobs/test/logs?cursor=0:0",
				wantStatus: http.StatusOK, want: apiv1.LogPage{Lines: []apiv1.LogLine{}, Next: "1:0", Done: true},
			},
			{
				name: "unknown job", path: "/api/v1/runs/" + cancelledID + "/jobs/deploy/logs",
				wantStatus: http.StatusNotFound, wantError: `run "` + cancelledID + `" has no job "deploy"`,
			},
			{
				name: "step past the last", path: "/api/v1/runs/" + cancelledID + "/jobs/test/logs?step=2",
				wantStatus: http.StatusBadRequest, wantError: `step "2": want -2 (provisioning), -1 (setup) or 0 to 1`,
			},
			{
				name: "step not a number", path: "/api/v1/runs/" + cancelledID + "/jobs/test/logs?step=x",
				wantStatus: http.StatusBadRequest, wantError: `step "x": want -2 (provisioning), -1 (setup) or 0 to 1`,
			},
			{
				name: "malformed cursor", path: "/api/v1/runs/" + cancelledID + "/jobs/test/logs?cursor=abc",
				wantStatus: http.StatusBadRequest, wantError: `cursor "abc"`,
			},
			{
				// Go's query parser drops a pair it cannot decode; the
				// cursor then read as absent and page 1 came back.
				name: "cursor that does not decode", path: "/api/v1/runs/" + cancelledID + "/jobs/test/logs?cursor=%zz",
				wantStatus: http.StatusBadRequest, wantError: `cursor "%zz"`,
			},
			{
				name: "cursor with a semicolon", path: "/api/v1/runs/" + cancelledID + "/jobs/test/logs?cursor=0;0",
				wantStatus: http.StatusBadRequest, wantError: `cursor "0;0"`,
			},
			{
				name: "cursor given twice", path: "/api/v1/runs/" + cancelledID + "/jobs/test/logs?cursor=0:0&cursor=junk",
				wantStatus: http.StatusBadRequest, wantError: "cursor: given 2 times",
			},
			{
				name: "step that does not decode", path: "/api/v1/runs/" + cancelledID + "/jobs/test/logs?step=%g1",
				wantStatus: http.StatusBadRequest, wantError: `step "%g1"`,
			},
			{
				name: "cursor past the end", path: "/api/v1/runs/" + cancelledID + "/jobs/test/logs?cursor=0:100",
				wantStatus: http.StatusBadRequest, wantError: "past the end",
			},
			{
				name: "cursor of another step", path: "/api/v1/runs/" + cancelledID + "/jobs/test/logs?step=1&cursor=0:0",
				wantStatus: http.StatusBadRequest, wantError: `cursor "0:0"`,
			},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				resp := h.admin(t, http.MethodGet, tt.path, nil)
				if resp.status != tt.wantStatus {
					t.Fatalf("got status %d (%s), want %d", resp.status, resp.body, tt.wantStatus)
				}
				if tt.wantError != "" {
					if got := resp.apiError(t).Error; !strings.Contains(got, tt.wantError) {
						t.Errorf("got error %q, want it to contain %q", got, tt.wantError)
					}
					return
				}
				var got apiv1.LogPage
				resp.decode(t, &got)
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("log page mismatch (-want +got):\n%s", diff)
				}
			})
		}
	})
}

func TestRunEventsOfFinishedRun(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, h *harness) {
		dir, _ := ciRepo(t)
		h.addSource(t, "events", dir, "")
		id := h.trigger(t, "events")[0].ID
		h.mustAdmin(t, http.MethodPost, "/api/v1/runs/"+id+"/cancel", nil, http.StatusOK, nil)

		// The stream of a finished run is its status, then the end.
		resp := h.admin(t, http.MethodGet, "/api/v1/runs/"+id+"/events", nil)
		if resp.status != http.StatusOK {
			t.Fatalf("got status %d (%s), want 200", resp.status, resp.body)
		}
		if got := resp.header.Get("Content-Type"); got != "text/event-stream" {
			t.Errorf("got content type %q, want text/event-stream", got)
		}
		type sse struct {
			Event string
			Data  apiv1.Event
		}
		var got []sse
		sc := bufio.NewScanner(bytes.NewReader(resp.body))
		var cur sse
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				cur.Event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &cur.Data); err != nil {
					t.Fatalf("decode event data %q: %v", line, err)
				}
			case line == "":
				got = append(got, cur)
				cur = sse{}
			}
		}
		run := h.getRun(t, id)
		if run.Error == "" {
			t.Errorf("got no error on the cancelled run, want one saying what was cancelled")
		}
		want := []sse{{Event: "run", Data: apiv1.Event{Kind: "run", RunID: id, Status: "cancelled", Error: run.Error}}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("events mismatch (-want +got):\n%s", diff)
		}
	})
}

func TestArchive(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, h *harness) {
		dir, sha := ciRepo(t)
		h.addSource(t, "arch", dir, "")
		h.addSource(t, "arch-other", dir, "")
		runID := h.trigger(t, "arch")[0].ID
		cancelledID := h.trigger(t, "arch")[0].ID
		h.mustAdmin(t, http.MethodPost, "/api/v1/runs/"+cancelledID+"/cancel", nil, http.StatusOK, nil)

		db := h.openStore(t)
		jobOf := func(runID string) (id string, attempt int) {
			run, err := db.GetRun(t.Context(), runID)
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range run.Jobs {
				if j.Name == "build" {
					return j.ID, j.Attempt
				}
			}
			t.Fatalf("run %s has no job build", runID)
			return "", 0
		}
		tokens, err := auth.LoadJobTokens(h.dataDir) // the orchestrator's key
		if err != nil {
			t.Fatal(err)
		}
		foreign, err := auth.LoadJobTokens(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		jobID, attempt := jobOf(runID)
		cancelledJobID, cancelledAttempt := jobOf(cancelledID)

		tests := []struct {
			name       string
			source     string
			sha        string
			auth       string // Authorization; "" for none
			wantStatus int
		}{
			{name: "no token", source: "arch", sha: sha, wantStatus: http.StatusUnauthorized},
			{name: "malformed token", source: "arch", sha: sha, auth: "Bearer kjt_garbage", wantStatus: http.StatusUnauthorized},
			{name: "token of another key", source: "arch", sha: sha, auth: "Bearer " + foreign.Mint(jobID, attempt), wantStatus: http.StatusUnauthorized},
			{name: "admin token", source: "arch", sha: sha, auth: "Bearer " + adminToken, wantStatus: http.StatusUnauthorized},
			{name: "token without scheme", source: "arch", sha: sha, auth: tokens.Mint(jobID, attempt), wantStatus: http.StatusUnauthorized},
			{name: "token of an unfinished job", source: "arch", sha: sha, auth: "Bearer " + tokens.Mint(jobID, attempt), wantStatus: http.StatusOK},
			{name: "another commit", source: "arch", sha: strings.Repeat("0", 40), auth: "Bearer " + tokens.Mint(jobID, attempt), wantStatus: http.StatusForbidden},
			{name: "another source", source: "arch-other", sha: sha, auth: "Bearer " + tokens.Mint(jobID, attempt), wantStatus: http.StatusForbidden},
			{name: "another attempt", source: "arch", sha: sha, auth: "Bearer " + tokens.Mint(jobID, attempt+1), wantStatus: http.StatusForbidden},
			{name: "unknown job", source: "arch", sha: sha, auth: "Bearer " + tokens.Mint("no-such-job", 0), wantStatus: http.StatusForbidden},
			{name: "cancelled job", source: "arch", sha: sha, auth: "Bearer " + tokens.Mint(cancelledJobID, cancelledAttempt), wantStatus: http.StatusForbidden},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				header := http.Header{}
				if tt.auth != "" {
					header.Set("Authorization", tt.auth)
				}
				resp := h.do(t, http.MethodGet, "/api/v1/sources/"+tt.source+"/archive/"+tt.sha, header, nil)
				if resp.status != tt.wantStatus {
					t.Fatalf("got status %d (%.200q), want %d", resp.status, resp.body, tt.wantStatus)
				}
				if tt.wantStatus != http.StatusOK {
					if got := resp.apiError(t).Error; got == "" {
						t.Errorf("got no error message, want one")
					}
					return
				}
				if got := resp.header.Get("Content-Type"); got != "application/gzip" {
					t.Errorf("got content type %q, want application/gzip", got)
				}
				if !bytes.HasPrefix(resp.body, []byte{0x1f, 0x8b}) {
					t.Errorf("got a body starting %x, want gzip", resp.body[:min(len(resp.body), 4)])
				}
			})
		}
	})
}

func TestAgentsAndAgentTokens(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, h *harness) {
		var agents apiv1.AgentList
		h.mustAdmin(t, http.MethodGet, "/api/v1/agents", nil, http.StatusOK, &agents)
		if diff := cmp.Diff([]apiv1.Agent{}, agents.Agents); diff != "" {
			t.Errorf("agents mismatch (-want +got):\n%s", diff)
		}

		tests := []struct {
			name       string
			in         string
			wantStatus int
			wantLabels []string
		}{
			{name: "labels", in: `{"labels": ["linux", "docker"]}`, wantStatus: http.StatusCreated, wantLabels: []string{"linux", "docker"}},
			{name: "no labels", in: `{}`, wantStatus: http.StatusCreated, wantLabels: []string{}},
			{name: "reserved label", in: `{"labels": ["kici:os:linux"]}`, wantStatus: http.StatusBadRequest},
			{name: "label with a comma", in: `{"labels": ["a,b"]}`, wantStatus: http.StatusBadRequest},
			{name: "empty label", in: `{"labels": [""]}`, wantStatus: http.StatusBadRequest},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				resp := h.admin(t, http.MethodPost, "/api/v1/agent-tokens", tt.in)
				if resp.status != tt.wantStatus {
					t.Fatalf("got status %d (%s), want %d", resp.status, resp.body, tt.wantStatus)
				}
				if tt.wantStatus != http.StatusCreated {
					return
				}
				var got apiv1.AgentToken
				resp.decode(t, &got)
				if got.ID == "" || !strings.HasPrefix(got.Token, "kat_") {
					t.Errorf("got id %q and token %q, want an id and a kat_ token", got.ID, got.Token)
				}
				if diff := cmp.Diff(tt.wantLabels, got.Labels); diff != "" {
					t.Errorf("labels mismatch (-want +got):\n%s", diff)
				}
			})
		}
	})
}
