package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/kici-dev/kici/internal/apiv1"
	"github.com/kici-dev/kici/internal/runstate"
	"github.com/kici-dev/kici/internal/store"
)

// play moves a job of a run through dispatched and running on agentID
// (the step, when ok, running from start to end) to status to, as an
// agent's reports would.
func play(t *testing.T, db *store.DB, jobID, agentID string, attempt int, to store.JobStatus, start, end time.Time) {
	t.Helper()
	ctx := t.Context()
	for _, tr := range []store.JobTransition{
		{ID: jobID, From: runstate.JobFrom(store.JobDispatched), To: store.JobDispatched, AgentID: &agentID, Attempt: &attempt},
		{ID: jobID, From: runstate.JobFrom(store.JobRunning), To: store.JobRunning, StartedAt: &start},
	} {
		if ok, err := db.UpdateJobStatus(ctx, tr); err != nil || !ok {
			t.Fatalf("move job to %s: (%v, %v)", tr.To, ok, err)
		}
	}
	stepTo, code := store.StepSuccess, 0
	if to == store.JobFailure {
		stepTo, code = store.StepFailure, 1
	}
	if _, err := db.UpdateStepStatus(ctx, store.StepTransition{JobID: jobID, Index: 0, From: runstate.StepFrom(store.StepRunning),
		To: store.StepRunning, StartedAt: &start}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.UpdateStepStatus(ctx, store.StepTransition{JobID: jobID, Index: 0, From: runstate.StepFrom(stepTo),
		To: stepTo, ExitCode: &code, FinishedAt: &end}); err != nil {
		t.Fatal(err)
	}
	if to == store.JobRunning {
		return
	}
	if ok, err := db.UpdateJobStatus(ctx, store.JobTransition{ID: jobID, From: runstate.JobFrom(to), To: to, FinishedAt: &end}); err != nil || !ok {
		t.Fatalf("end job: (%v, %v)", ok, err)
	}
	if _, err := db.Dequeue(ctx, jobID); err != nil {
		t.Fatal(err)
	}
}

// TestRunShowsAttemptsAndStepTimes: GET /api/v1/runs/{id} gives each job
// its attempt and when it was queued, the ends of its earlier attempts,
// and each step its start and end.
func TestRunShowsAttemptsAndStepTimes(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, h *harness) {
		ctx := t.Context()
		dir, _ := ciRepo(t)
		h.addSource(t, "attempts", dir, "")
		id := h.trigger(t, "attempts")[0].ID
		first := h.getRun(t, id)
		build := first.Jobs[0]
		if build.Name != "build" || build.Attempt != 1 || build.QueuedAt == nil || build.Steps[0].StartedAt != nil || build.Steps[0].FinishedAt != nil {
			t.Fatalf("build before it ran: %+v, want attempt 1, queued, its step neither started nor finished", build)
		}
		if test := first.Jobs[2]; test.Name != "test" || test.Attempt != 1 || test.QueuedAt != nil {
			t.Errorf("test, waiting for build: attempt %d, queued at %v; want 1, nil", test.Attempt, test.QueuedAt)
		}

		db := h.openStore(t)
		t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
		play(t, db, build.ID, "agent-a", 1, store.JobRunning, t0, t0.Add(2*time.Second))
		job, err := db.GetJob(ctx, build.ID)
		if err != nil {
			t.Fatal(err)
		}
		err = db.Tx(ctx, func(tx *store.Tx) error {
			_, err := tx.RetryJob(ctx, store.Retry{Job: job, From: runstate.RetryFrom(), Cause: "agent-lost",
				Error: "agent lost: agent agent-a disconnected and did not come back within 1m0s"})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		t1 := t0.Add(time.Minute)
		play(t, db, build.ID, "agent-b", 2, store.JobSuccess, t1, t1.Add(1500*time.Millisecond))

		got := h.getRun(t, id).Jobs[0]
		if got.Attempt != 2 || got.Status != "success" || got.AgentID != "agent-b" || got.QueuedAt == nil || !got.QueuedAt.After(*build.QueuedAt) {
			t.Errorf("build after its second attempt: attempt %d, %s on %s, queued at %v; want 2, success on agent-b, queued again after %v",
				got.Attempt, got.Status, got.AgentID, got.QueuedAt, build.QueuedAt)
		}
		step := got.Steps[0]
		if step.StartedAt == nil || !step.StartedAt.Equal(t1) || step.FinishedAt == nil || !step.FinishedAt.Equal(t1.Add(1500*time.Millisecond)) {
			t.Errorf("step of the second attempt: started %v, finished %v; want %v, %v", step.StartedAt, step.FinishedAt, t1, t1.Add(1500*time.Millisecond))
		}
		want := []apiv1.JobAttempt{{Attempt: 1, Cause: "agent-lost", Error: "agent lost: agent agent-a disconnected and did not come back within 1m0s",
			AgentID: "agent-a", StartedAt: &t0}}
		ignoreEnd := cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".EndedAt" }, cmp.Ignore())
		if diff := cmp.Diff(want, got.PreviousAttempts, ignoreEnd); diff != "" {
			t.Errorf("previous attempts (-want +got):\n%s", diff)
		}
		// The raw JSON names the fields as the contract does.
		resp := h.admin(t, http.MethodGet, "/api/v1/runs/"+id, nil)
		var compact bytes.Buffer
		if err := json.Compact(&compact, resp.body); err != nil {
			t.Fatal(err)
		}
		for _, field := range []string{`"attempt":2`, `"queued_at":"`, `"started_at":"2026-03-01T10:01:00Z"`, `"finished_at":"2026-03-01T10:01:01.5Z"`, `"previous_attempts":[`} {
			if !strings.Contains(compact.String(), field) {
				t.Errorf("GET run: body lacks %s:\n%s", field, compact.String())
			}
		}
	})
}

// TestRerunFailed: POST /api/v1/runs/{id}/rerun with {"failed": true}
// reruns the jobs that did not succeed as a child run, with the job that
// succeeded copied; a run still in progress, or with nothing that failed,
// is refused with 409.
func TestRerunFailed(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, h *harness) {
		ctx := t.Context()
		dir, _ := ciRepo(t)
		h.addSource(t, "rerun-failed", dir, "")
		db := h.openStore(t)
		t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
		failed := true
		body := apiv1.RerunRequest{Failed: failed}

		pending := h.trigger(t, "rerun-failed")[0].ID
		resp := h.admin(t, http.MethodPost, "/api/v1/runs/"+pending+"/rerun", body)
		if resp.status != http.StatusConflict || !strings.Contains(resp.apiError(t).Error, "has not ended") {
			t.Errorf("rerun --failed of a pending run: %d %s, want 409 saying it has not ended", resp.status, resp.body)
		}

		// A run whose build succeeded, lint failed and test (after build)
		// was cancelled.
		id := h.trigger(t, "rerun-failed")[0].ID
		run := h.getRun(t, id)
		play(t, db, run.Jobs[0].ID, "agent-a", 1, store.JobSuccess, t0, t0.Add(time.Second))
		play(t, db, run.Jobs[1].ID, "agent-b", 1, store.JobFailure, t0, t0.Add(time.Second))
		if _, err := db.UpdateJobStatus(ctx, store.JobTransition{ID: run.Jobs[2].ID, From: runstate.JobFrom(store.JobCancelled), To: store.JobCancelled}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.UpdateRunStatus(ctx, store.RunTransition{ID: id, From: runstate.RunFrom(store.RunFailure), To: store.RunFailure}); err != nil {
			t.Fatal(err)
		}
		resp = h.admin(t, http.MethodPost, "/api/v1/runs/"+id+"/rerun", map[string]any{"failed": true, "jobs": "all"})
		if resp.status != http.StatusBadRequest {
			t.Errorf("rerun with an unknown field: %d %s, want 400", resp.status, resp.body)
		}
		var ref apiv1.RunRef
		h.mustAdmin(t, http.MethodPost, "/api/v1/runs/"+id+"/rerun", body, http.StatusCreated, &ref)
		child := h.getRun(t, ref.ID)
		if child.ParentRun != id {
			t.Errorf("child's parent_run_id: %q, want %q", child.ParentRun, id)
		}
		if diff := cmp.Diff(map[string]string{"build": "success", "lint": "queued", "test": "queued"}, jobStatuses(child)); diff != "" {
			t.Errorf("child's jobs (-want +got):\n%s", diff)
		}
		if b := child.Jobs[0]; b.AgentID != "agent-a" || b.Steps[0].Status != "success" || b.Steps[0].FinishedAt == nil {
			t.Errorf("reused build: %+v, want it as it ended in the parent", b)
		}

		ok := h.trigger(t, "rerun-failed")[0].ID
		for _, j := range h.getRun(t, ok).Jobs {
			if j.Name != "test" {
				play(t, db, j.ID, "agent-a", 1, store.JobSuccess, t0, t0.Add(time.Second))
			}
		}
		if _, err := db.UpdateJobStatus(ctx, store.JobTransition{ID: h.getRun(t, ok).Jobs[2].ID, From: []store.JobStatus{store.JobWaiting}, To: store.JobSkipped}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.UpdateRunStatus(ctx, store.RunTransition{ID: ok, From: runstate.RunFrom(store.RunSuccess), To: store.RunSuccess}); err != nil {
			t.Fatal(err)
		}
		resp = h.admin(t, http.MethodPost, "/api/v1/runs/"+ok+"/rerun", body)
		if resp.status != http.StatusConflict || !strings.Contains(resp.apiError(t).Error, "nothing to rerun") {
			t.Errorf("rerun --failed of a run that succeeded: %d %s, want 409 saying there is nothing to rerun", resp.status, resp.body)
		}
		// Without the body, a rerun is the whole run, as before.
		h.mustAdmin(t, http.MethodPost, "/api/v1/runs/"+ok+"/rerun", nil, http.StatusCreated, &ref)
		if diff := cmp.Diff(map[string]string{"build": "queued", "lint": "queued", "test": "waiting"}, jobStatuses(h.getRun(t, ref.ID))); diff != "" {
			t.Errorf("plain rerun's jobs (-want +got):\n%s", diff)
		}
	})
}
