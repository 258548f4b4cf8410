package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/kici-dev/kici/internal/workflow"
)

func TestCreateRunAndGetRun(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		nr := testRun(
			testJob("build", []string{"linux"}),
			testJob("lint", []string{"linux"}),
			testJob("deploy", []string{"linux", "prod"}, "build", "lint"),
		)
		created, err := db.CreateRun(ctx, nr)
		if err != nil {
			t.Fatalf("create run: %v", err)
		}
		if created.ID == "" || created.Status != RunPending {
			t.Errorf("got ID %q and status %q, want an ID and %q", created.ID, created.Status, RunPending)
		}
		got, err := db.GetRun(ctx, created.ID)
		if err != nil {
			t.Fatalf("get run: %v", err)
		}
		if diff := cmp.Diff(created, got, cmpopts.EquateEmpty(), equateJSON); diff != "" {
			t.Errorf("GetRun differs from what CreateRun returned (-created +got):\n%s", diff)
		}
		if !json.Valid(got.Event) || string(got.Event) == "null" {
			t.Errorf("got event %s, want the event written", got.Event)
		}
		if diff := cmp.Diff(nr.Plan, got.Plan, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("plan (-want +got):\n%s", diff)
		}

		// The head is the run without plan and jobs; the outline adds the
		// jobs without steps, specs decoded on demand.
		head, err := db.GetRunHead(ctx, created.ID)
		if err != nil {
			t.Fatalf("get run head: %v", err)
		}
		wantHead := got
		wantHead.Plan, wantHead.Jobs = workflow.Workflow{}, nil
		if diff := cmp.Diff(wantHead, head, cmpopts.EquateEmpty(), equateJSON); diff != "" {
			t.Errorf("GetRunHead (-want +got):\n%s", diff)
		}
		var outline Run
		if err := db.Tx(ctx, func(tx *Tx) error {
			outline, err = tx.GetRunOutline(ctx, created.ID)
			return err
		}); err != nil {
			t.Fatalf("get run outline: %v", err)
		}
		if len(outline.Jobs) != len(got.Jobs) {
			t.Fatalf("outline has %d jobs, want %d", len(outline.Jobs), len(got.Jobs))
		}
		for i := range outline.Jobs {
			j := &outline.Jobs[i]
			if j.SpecJSON == nil || j.Spec.Name != "" || j.Steps != nil {
				t.Errorf("outline job %d: want an encoded spec, an empty Spec and no steps, got %+v", i, *j)
			}
			if err := j.DecodeSpec(); err != nil {
				t.Fatalf("decode spec: %v", err)
			}
			want := got.Jobs[i]
			want.Steps = nil
			if diff := cmp.Diff(want, *j, cmpopts.EquateEmpty(), equateJSON); diff != "" {
				t.Errorf("outline job %d after DecodeSpec (-want +got):\n%s", i, diff)
			}
		}
		for _, want := range got.Jobs {
			head, err := db.GetJobHead(ctx, want.ID)
			if err != nil {
				t.Fatalf("get job head: %v", err)
			}
			if head.Steps != nil || head.SpecJSON == nil {
				t.Errorf("job head %s: want no steps and an encoded spec", want.Name)
			}
			if err := head.DecodeSpec(); err != nil {
				t.Fatal(err)
			}
			steps, err := db.ListJobSteps(ctx, want.ID)
			if err != nil {
				t.Fatalf("list job steps: %v", err)
			}
			if diff := cmp.Diff(want.Steps, steps, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("steps of %s (-want +got):\n%s", want.Name, diff)
			}
			want.Steps = nil
			if diff := cmp.Diff(want, head, cmpopts.EquateEmpty(), equateJSON); diff != "" {
				t.Errorf("job head %s after DecodeSpec (-want +got):\n%s", want.Name, diff)
			}
		}
		if _, err := db.GetJobHead(ctx, "no-such-job"); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetJobHead of a missing job: got %v, want ErrNotFound", err)
		}
		if _, err := db.GetRunHead(ctx, "no-such-run"); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetRunHead of a missing run: got %v, want ErrNotFound", err)
		}

		type jobSummary struct {
			Name   string
			Status JobStatus
			Steps  []string
		}
		var jobs []jobSummary
		ids := map[string]string{}
		for _, j := range got.Jobs {
			s := jobSummary{Name: j.Name, Status: j.Status}
			for _, st := range j.Steps {
				s.Steps = append(s.Steps, st.Name+":"+string(st.Status))
			}
			jobs = append(jobs, s)
			ids[j.Name] = j.ID
		}
		wantJobs := []jobSummary{
			{Name: "build", Status: JobQueued, Steps: []string{"build:pending", "test:pending"}},
			{Name: "lint", Status: JobQueued, Steps: []string{"build:pending", "test:pending"}},
			{Name: "deploy", Status: JobWaiting, Steps: []string{"build:pending", "test:pending"}},
		}
		if diff := cmp.Diff(wantJobs, jobs); diff != "" {
			t.Errorf("jobs (-want +got):\n%s", diff)
		}

		needs, err := db.ListJobNeeds(ctx, got.ID)
		if err != nil {
			t.Fatalf("list needs: %v", err)
		}
		wantNeeds := []JobNeed{
			{JobID: ids["deploy"], NeedsJobID: ids["build"], RunOn: []string{"success"}},
			{JobID: ids["deploy"], NeedsJobID: ids["lint"], RunOn: []string{"success"}},
		}
		sortNeeds := cmpopts.SortSlices(func(a, b JobNeed) bool { return a.NeedsJobID < b.NeedsJobID })
		if diff := cmp.Diff(wantNeeds, needs, sortNeeds); diff != "" {
			t.Errorf("needs (-want +got):\n%s", diff)
		}

		queue, err := db.ListQueue(ctx)
		if err != nil {
			t.Fatalf("list queue: %v", err)
		}
		var queued []string
		for _, e := range queue {
			queued = append(queued, e.JobID)
			if e.RunID != got.ID || e.Status != QueuePending {
				t.Errorf("queue row %q: got run %q status %q, want run %q status %q", e.JobID, e.RunID, e.Status, got.ID, QueuePending)
			}
		}
		if diff := cmp.Diff([]string{ids["build"], ids["lint"]}, queued); diff != "" {
			t.Errorf("queued jobs, in order (-want +got):\n%s", diff)
		}

		job, err := db.GetJob(ctx, ids["deploy"])
		if err != nil {
			t.Fatalf("get job: %v", err)
		}
		if diff := cmp.Diff(got.Jobs[2], job); diff != "" {
			t.Errorf("GetJob (-want +got):\n%s", diff)
		}

		for name, err := range map[string]error{
			"get missing run": func() error { _, err := db.GetRun(ctx, "nope"); return err }(),
			"get missing job": func() error { _, err := db.GetJob(ctx, "nope"); return err }(),
		} {
			if !errors.Is(err, ErrNotFound) {
				t.Errorf("%s: got %v, want ErrNotFound", name, err)
			}
		}
	})
}

// equateJSON compares raw JSON by meaning: PostgreSQL's JSONB does not
// keep key order or spacing.
// (Empty values are left to cmpopts.EquateEmpty.)
var equateJSON = cmp.FilterValues(func(a, b json.RawMessage) bool { return len(a) > 0 || len(b) > 0 },
	cmp.Transformer("json", func(raw json.RawMessage) any {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return string(raw)
		}
		return v
	}))

// TestCreateRunIsAtomic makes CreateRun fail at different points and
// checks that nothing of the run is left behind.
func TestCreateRunIsAtomic(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		existing := createTestRun(t, db, testJob("build", []string{"linux"}))
		tables := []string{"runs", "jobs", "steps", "job_needs", "dispatch_queue"}
		before := map[string]int{}
		for _, table := range tables {
			before[table] = countRows(t, db, table)
		}

		tests := []struct {
			name    string
			run     func() NewRun
			wantErr error // nil: any error
		}{
			{
				name: "duplicate job name after jobs were written",
				run: func() NewRun {
					return testRun(testJob("a", nil), testJob("b", nil), testJob("a", nil))
				},
				wantErr: ErrConflict,
			},
			{
				name: "unknown need after jobs and steps were written",
				run: func() NewRun {
					return testRun(testJob("a", nil), testJob("b", nil, "a"), testJob("c", nil, "missing"))
				},
			},
			{
				name: "run ID that exists",
				run: func() NewRun {
					nr := testRun(testJob("a", nil))
					nr.ID = existing.ID
					return nr
				},
				wantErr: ErrConflict,
			},
			{
				name: "job ID that exists in another run",
				run: func() NewRun {
					nr := testRun(testJob("a", nil), testJob("b", nil))
					nr.Jobs[1].ID = existing.Jobs[0].ID
					return nr
				},
				wantErr: ErrConflict,
			},
			{
				name: "bad status on the last job",
				run: func() NewRun {
					nr := testRun(testJob("a", nil), testJob("b", nil))
					nr.Jobs[1].Status = "exploded"
					return nr
				},
			},
			{
				name: "invalid event",
				run: func() NewRun {
					nr := testRun(testJob("a", nil))
					nr.Event = json.RawMessage("{")
					return nr
				},
			},
		}
		for _, tt := range tests {
			// Not parallel: each case compares whole-table row counts.
			t.Run(tt.name, func(t *testing.T) {
				nr := tt.run()
				_, err := db.CreateRun(ctx, nr)
				if err == nil {
					t.Fatalf("create run: got no error, want one")
				}
				if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
					t.Errorf("create run: got %v, want %v", err, tt.wantErr)
				}
				for _, table := range tables {
					if got := countRows(t, db, table); got != before[table] {
						t.Errorf("table %s: got %d rows after the failed create, want %d", table, got, before[table])
					}
				}
			})
		}
	})
}

func TestListRuns(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		var ids []string
		for i, source := range []string{"a", "b", "a", "a"} {
			nr := testRun(testJob("build", nil))
			nr.Source = source
			nr.Workflow, nr.Ref = "ci.yml", "refs/heads/main"
			switch i {
			case 1:
				nr.Ref = "main" // a manual run's ref can be the bare name
			case 2:
				nr.Status = RunRunning
				nr.Workflow, nr.Ref = "deploy.yml", "refs/heads/mainline"
			}
			run, err := db.CreateRun(ctx, nr)
			if err != nil {
				t.Fatalf("create run %d: %v", i, err)
			}
			ids = append(ids, run.ID)
		}
		tests := []struct {
			name   string
			filter RunFilter
			want   []string
		}{
			{name: "all, newest first", filter: RunFilter{}, want: []string{ids[3], ids[2], ids[1], ids[0]}},
			{name: "by source", filter: RunFilter{Source: "a"}, want: []string{ids[3], ids[2], ids[0]}},
			{name: "by status", filter: RunFilter{Status: RunRunning}, want: []string{ids[2]}},
			{name: "by source and status", filter: RunFilter{Source: "b", Status: RunPending}, want: []string{ids[1]}},
			{name: "limit", filter: RunFilter{Limit: 2}, want: []string{ids[3], ids[2]}},
			{name: "no match", filter: RunFilter{Source: "c"}, want: nil},
			{name: "by workflow", filter: RunFilter{Workflow: "deploy.yml"}, want: []string{ids[2]}},
			{name: "by branch, either spelling of the ref", filter: RunFilter{Branch: "main"}, want: []string{ids[3], ids[1], ids[0]}},
			{name: "by branch and source", filter: RunFilter{Branch: "mainline", Source: "a"}, want: []string{ids[2]}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				runs, err := db.ListRuns(t.Context(), tt.filter)
				if err != nil {
					t.Fatalf("list runs: %v", err)
				}
				var got []string
				for _, r := range runs {
					got = append(got, r.ID)
					if r.Jobs != nil {
						t.Errorf("run %q: got %d jobs, want none from ListRuns", r.ID, len(r.Jobs))
					}
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("run IDs (-want +got):\n%s", diff)
				}
			})
		}
	})
}

// TestRunFieldsRoundTrip checks every column of a run reads back as written,
// the optional ones included.
func TestRunFieldsRoundTrip(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		parent := createTestRun(t, db)
		nr := testRun(workflow.Job{Name: "solo", Base: "solo", RunsOn: nil, Matrix: map[string]string{"go": "1.26"}})
		nr.ParentRunID = parent.ID
		nr.QueueExpiresAt = new(testNow.Add(3600_500_000_123)) // sub-microsecond part is dropped
		run, err := db.CreateRun(ctx, nr)
		if err != nil {
			t.Fatalf("create run: %v", err)
		}
		got, err := db.GetRun(ctx, run.ID)
		if err != nil {
			t.Fatalf("get run: %v", err)
		}
		if got.ParentRunID != parent.ID {
			t.Errorf("got parent %q, want %q", got.ParentRunID, parent.ID)
		}
		if diff := cmp.Diff([]string{}, got.Jobs[0].RunsOn); diff != "" {
			t.Errorf("runs_on of a job without labels (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[string]string{"go": "1.26"}, got.Jobs[0].Spec.Matrix); diff != "" {
			t.Errorf("spec matrix (-want +got):\n%s", diff)
		}
		e, err := db.GetQueueEntry(ctx, got.Jobs[0].ID)
		if err != nil {
			t.Fatalf("get queue entry: %v", err)
		}
		want := normTime(testNow.Add(3600_500_000_123))
		if e.ExpiresAt == nil || !e.ExpiresAt.Equal(want) || e.ExpiresAt.Location() != want.Location() {
			t.Errorf("got queue expiry %v, want %v", e.ExpiresAt, want)
		}
	})
}

// TestCreateRunInBatches: a run wider than one INSERT statement may carry
// (jobs are written maxInsertParams/13 at a time) is written whole, each
// job with its steps, needs and queue row, in creation order.
func TestCreateRunInBatches(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		n := maxInsertParams/13 + 50
		jobs := []workflow.Job{testJob("root", []string{"linux"})}
		for i := 1; i < n; i++ {
			jobs = append(jobs, testJob(fmt.Sprintf("leaf-%04d", i), []string{"linux"}, "root"))
		}
		created := createTestRun(t, db, jobs...)
		got, err := db.GetRun(t.Context(), created.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Jobs) != n {
			t.Fatalf("got %d jobs, want %d", len(got.Jobs), n)
		}
		for i, j := range got.Jobs {
			if j.Name != jobs[i].Name || len(j.Steps) != 2 || j.Steps[1].Name != "test" {
				t.Fatalf("job %d: got %q with steps %+v, want %q with its 2 steps", i, j.Name, j.Steps, jobs[i].Name)
			}
		}
		var counts map[JobStatus]int
		if err := db.Tx(t.Context(), func(tx *Tx) error {
			counts, err = tx.CountRunJobs(t.Context(), created.ID)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(map[JobStatus]int{JobQueued: 1, JobWaiting: n - 1}, counts); diff != "" {
			t.Errorf("job counts (-want +got):\n%s", diff)
		}
		if got, want := countRows(t, db, "job_needs"), n-1; got != want {
			t.Errorf("job_needs rows: got %d, want %d", got, want)
		}
		edges, err := db.ListJobNeeds(t.Context(), created.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range edges {
			if e.NeedsJobID != got.Jobs[0].ID {
				t.Fatalf("edge %+v: want every leaf to need root %s", e, got.Jobs[0].ID)
			}
		}
	})
}

// TestRunAwaitingApproval creates a run held for approval, with its error,
// and moves it on to pending with the error cleared, as an approval does.
func TestRunAwaitingApproval(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		nr := testRun(testJob("build", []string{"linux"}))
		nr.Status, nr.Error = RunAwaitingApproval, "awaiting approval: a pull request from a fork"
		nr.Jobs[0].Status, nr.Jobs[0].Enqueue = JobWaiting, false
		run, err := db.CreateRun(ctx, nr)
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		got, err := db.GetRun(ctx, run.ID)
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		if got.Status != RunAwaitingApproval || got.Error != nr.Error {
			t.Errorf("got status %q error %q, want %q %q", got.Status, got.Error, RunAwaitingApproval, nr.Error)
		}
		list, err := db.ListRuns(ctx, RunFilter{Status: RunAwaitingApproval, Limit: 10})
		if err != nil || len(list) != 1 || list[0].ID != run.ID {
			t.Errorf("list awaiting: got %d runs (%v), want the one", len(list), err)
		}
		ok, err := db.UpdateRunStatus(ctx, RunTransition{ID: run.ID, From: []RunStatus{RunAwaitingApproval}, To: RunPending, Error: new("")})
		if err != nil || !ok {
			t.Fatalf("approve: got %v %v, want changed", ok, err)
		}
		got, err = db.GetRun(ctx, run.ID)
		if err != nil || got.Status != RunPending || got.Error != "" {
			t.Errorf("after approval: got %q %q (%v), want pending without error", got.Status, got.Error, err)
		}
	})
}

// TestLockJobHeadAndRaiseLastSeq: the locked read gives the job's head with
// its last_seq, and RaiseJobLastSeq only ever raises it.
func TestLockJobHeadAndRaiseLastSeq(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		run, err := db.CreateRun(ctx, testRun(testJob("a", []string{"linux"})))
		if err != nil {
			t.Fatal(err)
		}
		id := run.Jobs[0].ID
		for _, step := range []struct {
			raise, want int64
		}{{5, 5}, {3, 5}, {9, 9}} {
			err := db.Tx(ctx, func(tx *Tx) error {
				if err := tx.RaiseJobLastSeq(ctx, id, step.raise); err != nil {
					return err
				}
				j, err := tx.LockJobHead(ctx, id)
				if err != nil {
					return err
				}
				if j.ID != id || j.LastSeq != step.want {
					t.Errorf("after raising to %d: got job %q last_seq %d, want %q %d", step.raise, j.ID, j.LastSeq, id, step.want)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		err = db.Tx(ctx, func(tx *Tx) error {
			_, err := tx.LockJobHead(ctx, "no-such-job")
			return err
		})
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("lock a missing job: got %v, want ErrNotFound", err)
		}
	})
}
